// Reduction operators of the collectives.
#pragma once

#include <string>

#include "core/enum_names.h"

namespace vescale::comm {

enum class ReduceOp { kSum, kAvg, kMax };

/// ReduceOp <-> "sum", "avg", "max".
const EnumNames<ReduceOp>& reduce_op_names();
const char* reduce_op_name(ReduceOp op);

/// Parses "sum", "avg" or "max"; throws UserError otherwise.
ReduceOp parse_reduce_op(const std::string& text);

}  // namespace vescale::comm
