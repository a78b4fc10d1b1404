// Reduction operators of the collectives.
#pragma once

#include <string>

namespace vescale::comm {

enum class ReduceOp { kSum, kAvg, kMax };

/// "sum", "avg", "max".
const char* reduce_op_name(ReduceOp op);

/// Parses "sum", "avg" or "max"; throws UserError otherwise.
ReduceOp parse_reduce_op(const std::string& text);

}  // namespace vescale::comm
