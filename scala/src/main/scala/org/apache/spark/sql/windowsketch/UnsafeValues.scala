package org.apache.spark.sql.windowsketch

import org.apache.spark.sql.catalyst.expressions.{GenericInternalRow, UnsafeArrayData, UnsafeProjection,
  UnsafeRow}
import org.apache.spark.sql.types.{ArrayType, DataType, StructType}

/**
 * Values of `dataType` in Spark's unsafe form: a struct as an UnsafeRow, an array as
 * UnsafeArrayData, anything else as it is. An output row's serializer copies such a value
 * as bytes where it writes any other field by field: an answer emitted again (a live key's
 * at idle ticks, a running frame's top values while they stay) is converted once.
 */
final class UnsafeValues(dataType: DataType) extends Serializable {
  // Made where it runs: generated projections do not serialize.
  @transient private lazy val projection = UnsafeProjection.create(Array(dataType))
  @transient private lazy val holder = new GenericInternalRow(1)

  def apply(value: Any): Any = value match {
    case null | _: UnsafeRow | _: UnsafeArrayData => value
    case _ => dataType match {
      case s: StructType => holder.update(0, value); projection(holder).getStruct(0, s.length).copy()
      case _: ArrayType => holder.update(0, value); projection(holder).getArray(0).copy()
      case _ => value
    }
  }
}
