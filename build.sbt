// sbt build for users with a Maven repository. It compiles the same sources as the
// offline build (scala/build_jar.py, run by `pip install`), against Spark as "provided".
ThisBuild / scalaVersion := "2.13.18"

lazy val root = (project in file("."))
  .settings(
    name := "windowsketch",
    organization := "io.github.windowsketch",
    // One version for the jar and the Python package.
    version := {
      val init = IO.read(baseDirectory.value / "python" / "windowsketch" / "__init__.py")
      """__version__ = "([^"]+)"""".r.findFirstMatchIn(init).get.group(1)
    },
    Compile / scalaSource := baseDirectory.value / "scala" / "src" / "main" / "scala",
    Test / scalaSource := baseDirectory.value / "scala" / "src" / "test" / "scala",
    libraryDependencies += "org.apache.spark" %% "spark-sql" % "4.3.0" % Provided,
    scalacOptions ++= Seq("-release", "17", "-deprecation", "-feature", "-Werror"),
    Compile / packageBin / artifactPath :=
      baseDirectory.value / "python" / "windowsketch" / "jars" / s"windowsketch-${version.value}.jar"
  )
