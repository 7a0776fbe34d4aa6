// sbt build for users with a Maven repository. It compiles the same sources as the
// offline build (scala/build_jar.py, run by `pip install`), one Spark line at a time, with
// Spark as "provided":
//
//   sbt package                    # Spark 4.3, Scala 2.13
//   sbt -Dspark.line=3.5 package   # Spark 3.5, Scala 2.12, Java 8 bytecode
//
// The jar lands where the Python package looks for it, under the name it looks for.
// The table matches python/windowsketch/_lines.py (tests/python/test_lines.py checks it):
// line -> (Spark release compiled against, Scala version, bytecode level, shim folders).
val sparkLines = Map(
  "3.5" -> ("3.5.0", "2.12.18", "8", Seq("scala-spark-3.5", "scala-spark-3.5-4.1")),
  "4.0" -> ("4.0.0", "2.13.16", "17", Seq("scala-spark-4", "scala-spark-3.5-4.1")),
  "4.1" -> ("4.1.0", "2.13.17", "17", Seq("scala-spark-4", "scala-spark-3.5-4.1")),
  "4.2" -> ("4.2.0", "2.13.18", "17", Seq("scala-spark-4", "scala-spark-4.2+")),
  "4.3" -> ("4.3.0", "2.13.18", "17", Seq("scala-spark-4", "scala-spark-4.2+"))
)
val sparkLine = sys.props.getOrElse("spark.line", "4.3")
val lineSpec = sparkLines.getOrElse(
  sparkLine,
  sys.error(s"-Dspark.line=$sparkLine: supported lines are ${sparkLines.keys.toSeq.sorted.mkString(", ")}"))
val sparkVersion = lineSpec._1
val scalaFullVersion = lineSpec._2
val javaRelease = lineSpec._3
val shimFolders = lineSpec._4

ThisBuild / scalaVersion := scalaFullVersion

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
    Compile / unmanagedSourceDirectories ++=
      shimFolders.map(folder => baseDirectory.value / "scala" / "src" / "main" / folder),
    // What the jar was built for, checked when Spark loads it (SparkLineCheck).
    Compile / sourceGenerators += Def.task {
      val file = (Compile / sourceManaged).value / "windowsketch" / "spark" / "BuildInfo.scala"
      val scalaBinary = scalaBinaryVersion.value
      IO.write(file,
        s"""package windowsketch.spark
           |
           |/** Written by the build: what this jar was compiled for. */
           |object BuildInfo {
           |  final val Version = "${version.value}"
           |  final val SparkLine = "$sparkLine"
           |  final val ScalaBinaryVersion = "$scalaBinary"
           |  final val JarName = "windowsketch-${version.value}-spark${sparkLine}_$scalaBinary.jar"
           |}
           |""".stripMargin)
      Seq(file)
    }.taskValue,
    Test / scalaSource := baseDirectory.value / "scala" / "src" / "test" / "scala",
    libraryDependencies += "org.apache.spark" %% "spark-sql" % sparkVersion % Provided,
    // The Spark Connect relation plugin (scala-spark-4): Spark 4's server ships in pyspark.
    libraryDependencies ++= (if (sparkLine == "3.5") Nil
      else Seq("org.apache.spark" %% "spark-connect" % sparkVersion % Provided)),
    scalacOptions ++= Seq("-release", javaRelease, "-deprecation", "-feature", "-Werror"),
    Compile / packageBin / artifactPath :=
      baseDirectory.value / "python" / "windowsketch" / "jars" /
        s"windowsketch-${version.value}-spark${sparkLine}_${scalaBinaryVersion.value}.jar"
  )
