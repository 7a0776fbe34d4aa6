package org.apache.spark.sql.windowsketch

import org.apache.spark.sql.{Encoder, Row}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.encoders.ExpressionEncoder
import org.apache.spark.sql.catalyst.expressions.{CreateNamedStruct, Expression, UnaryExpression}
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
