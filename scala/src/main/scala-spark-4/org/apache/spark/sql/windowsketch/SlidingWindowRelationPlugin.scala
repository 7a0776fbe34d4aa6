package org.apache.spark.sql.windowsketch

import java.util.Optional

import org.apache.spark.connect.proto
import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.classic.Dataset
import org.apache.spark.sql.connect.planner.SparkConnectPlanner
import org.apache.spark.sql.connect.plugin.RelationPlugin
import org.sparkproject.connect.protobuf.{Any => ProtoAny, CodedInputStream, WireFormat}

import windowsketch.spark.{DropDuplicatesWithin, SlidingWindow}

/**
 * The live operators (`sliding_window`, `drop_duplicates_within`) for Spark Connect
 * clients: a relation extension whose `google.protobuf.Any` has an operator's type URL
 * ([[SlidingWindowRelationPlugin.Operators]]) and a value of two fields, 1 the events'
 * relation (a serialized `spark.connect.Relation`) and 2 the operator's JSON description
 * (its `fromJson`). The server plans the events, builds the operator as a classic session
 * would and returns its plan. Enable it with `spark.connect.extensions.relation.classes`
 * (windowsketch.configure sets it).
 */
class SlidingWindowRelationPlugin extends RelationPlugin {
  override def transform(relation: Array[Byte], planner: SparkConnectPlanner): Optional[LogicalPlan] = {
    val extension = ProtoAny.parseFrom(relation)
    val (name, build) = SlidingWindowRelationPlugin.Operators.getOrElse(extension.getTypeUrl,
      return Optional.empty())
    val in = CodedInputStream.newInstance(extension.getValue.toByteArray)
    var child: proto.Relation = null
    var json: String = null
    var tag = in.readTag()
    while (tag != 0) {
      WireFormat.getTagFieldNumber(tag) match {
        case 1 => child = proto.Relation.parseFrom(in.readBytes())
        case 2 => json = in.readString()
        case _ => in.skipField(tag)
      }
      tag = in.readTag()
    }
    if (child == null || json == null) {
      throw new IllegalArgumentException(
        s"$name: the Connect relation lacks its events or its description")
    }
    val events = Dataset.ofRows(planner.session, planner.transformRelation(child))
    Optional.of(build(events, json).queryExecution.logical)
  }
}

object SlidingWindowRelationPlugin {
  /** Each operator's type URL, with its name (for errors) and its builder. */
  val Operators: Map[String, (String, (DataFrame, String) => DataFrame)] = Map(
    "type.googleapis.com/windowsketch.SlidingWindow" -> ("sliding_window", SlidingWindow.fromJson _),
    "type.googleapis.com/windowsketch.DropDuplicatesWithin" ->
      ("drop_duplicates_within", DropDuplicatesWithin.fromJson _))
}
