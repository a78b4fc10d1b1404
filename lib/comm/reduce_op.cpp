#include "comm/reduce_op.h"

#include "core/error.h"

namespace vescale::comm {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kMax:
      return "max";
  }
  return "?";
}

ReduceOp parse_reduce_op(const std::string& text) {
  if (text == "sum") return ReduceOp::kSum;
  if (text == "avg") return ReduceOp::kAvg;
  if (text == "max") return ReduceOp::kMax;
  throw UserError(fmt::format("[comm] unknown reduce op '{}': use sum, avg or max", text));
}

}  // namespace vescale::comm
