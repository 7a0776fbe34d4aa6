package org.apache.spark.sql.windowsketch

import org.apache.spark.sql.{Encoder, Row}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.encoders.ExpressionEncoder
import org.apache.spark.sql.catalyst.expressions.{BoundReference, CreateNamedStruct, Expression, GetStructField,
  Literal, UnaryExpression}
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenFallback
import org.apache.spark.sql.types.{DataType, StructType}

/**
 * The encoder of the live operators' output rows: `Encoders.row(schema)`'s, with its
 * serializer kept out of whole-stage code generation.
 *
 * Whole-stage code generation writes a serializer's every field into one method. With
 * several nested output columns (six `sliding_window` families: structs, arrays of
 * structs) that method passed the JVM's 8,000-byte limit for compiling a method, so it ran
 * interpreted, at a third of the speed, for every output row. Outside whole-stage code
 * generation Spark serializes with an `UnsafeProjection`, which splits the fields into
 * methods of their own that the JVM compiles.
 */
object LiveOutputEncoder {
  def rows(schema: StructType): Encoder[Row] = {
    val encoder = ExpressionEncoder(schema)
    var marked = false
    // The first CreateNamedStruct going down is the row's own: mark its first field.
    val serializer = encoder.objSerializer.transformDown {
      case struct: CreateNamedStruct if !marked =>
        marked = true
        CreateNamedStruct(struct.children.updated(1, OutsideWholeStageCodegen(struct.children(1))))
    }
    require(marked, s"no struct in the serializer of $schema")
    encoder.copy(objSerializer = serializer)
  }
}

/**
 * The encoder of output rows built as Spark's internal rows of `schema` (UTF8String,
 * ArrayData, InternalRow; a TIMESTAMP as its microseconds): the serializer copies their
 * fields into the output row. The external rows of [[LiveOutputEncoder]] are converted field
 * by field, with each value's type checked, which cost a live operator a third of its time
 * when it emits a row per key and tick.
 *
 * The row reaches the serializer as the object Spark passes it, declared a `Row` by the
 * encoder this one is made from: [[InternalRowFields]] reads it without code generation, so
 * no generated code casts it.
 */
object InternalRowEncoder {
  def apply(schema: StructType): Encoder[InternalRow] = {
    val encoder = ExpressionEncoder(schema)
    val input = encoder.objSerializer.collectFirst { case b: BoundReference => b }
      .getOrElse(throw new IllegalStateException(s"no input in the serializer of $schema"))
    val row = InternalRowFields(input, schema)
    val serializer = CreateNamedStruct(schema.fields.toSeq.zipWithIndex.flatMap { case (f, i) =>
      Seq(Literal(f.name), GetStructField(row, i, Some(f.name)))
    })
    encoder.copy(objSerializer = serializer).asInstanceOf[Encoder[InternalRow]]
  }
}

/** The internal row `child` evaluates to, as a struct of `schema`; never NULL. */
case class InternalRowFields(child: Expression, schema: StructType) extends UnaryExpression with CodegenFallback {
  override def dataType: DataType = schema
  override def nullable: Boolean = false
  override def eval(input: InternalRow): Any = child.eval(input)
  override protected def withNewChildInternal(newChild: Expression): InternalRowFields = copy(child = newChild)
}

/**
 * Evaluates `child` as it is. Being a [[CodegenFallback]], it keeps the operator whose
 * expressions hold it out of whole-stage code generation (`CollapseCodegenStages`).
 */
case class OutsideWholeStageCodegen(child: Expression) extends UnaryExpression with CodegenFallback {
  override def dataType: DataType = child.dataType
  override def nullable: Boolean = child.nullable
  override def eval(input: InternalRow): Any = child.eval(input)
  override protected def withNewChildInternal(newChild: Expression): OutsideWholeStageCodegen =
    copy(child = newChild)
}
