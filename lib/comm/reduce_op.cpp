#include "comm/reduce_op.h"

#include "core/enum_names.h"

namespace vescale::comm {

const EnumNames<ReduceOp>& reduce_op_names() {
  static const EnumNames<ReduceOp> names(
      "[comm] reduce op",
      {{ReduceOp::kSum, "sum"}, {ReduceOp::kAvg, "avg"}, {ReduceOp::kMax, "max"}});
  return names;
}

const char* reduce_op_name(ReduceOp op) {
  return reduce_op_names().name(op);
}

ReduceOp parse_reduce_op(const std::string& text) {
  return reduce_op_names().parse(text);
}

}  // namespace vescale::comm
