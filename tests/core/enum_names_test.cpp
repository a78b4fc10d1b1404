// Every enum <-> name table (core/enum_names.h): names distinct and non-empty, each name parsed
// back to its value, an unknown name refused with the choices and the nearest one.
#include <gtest/gtest.h>

#include <set>

#include "checkpoint/checkpoint_format.h"
#include "comm/group.h"
#include "core/dtype_names.h"
#include "core/error.h"

namespace vescale {
namespace {

template <typename E>
void expect_round_trips(const EnumNames<E>& table, size_t count) {
  EXPECT_EQ(table.values().size(), count);
  std::set<std::string> seen;
  for (const E& value : table.values()) {
    const std::string name = table.name(value);
    EXPECT_FALSE(name.empty() || name == "?");
    EXPECT_TRUE(seen.insert(name).second) << name << " names two values";
    EXPECT_TRUE(table.parse(name) == value) << name;
    EXPECT_TRUE(table.has(value));
  }
}

TEST(EnumNames, EveryTableRoundTrips) {
  expect_round_trips(comm::backend_names(), 3);
  expect_round_trips(comm::reduce_op_names(), 3);
  expect_round_trips(comm::comm_kind_names(), 8);
  expect_round_trips(comm::flight_state_names(), 4);
  expect_round_trips(checkpoint_format_names(), 3);
  expect_round_trips(dtype_names(), 4);
}

TEST(EnumNames, AnUnknownNameIsRefusedWithTheChoicesAndTheNearest) {
  try {
    comm::parse_backend("glo");
    FAIL() << "'glo' was taken";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(),
                 "[comm] unknown backend 'glo': use auto, gloo or nccl (did you mean "
                 "'gloo'?)");
  }
  try {
    parse_checkpoint_format("zip");
    FAIL() << "'zip' was taken";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "unknown checkpoint.format 'zip': use sharded, deduped or merged");
  }
  EXPECT_FALSE(dtype_names().find("float8").has_value());
  EXPECT_FALSE(dtype_names().has(c10::kInt));
  EXPECT_EQ(dtype_names().choices(), "float32, bfloat16, float64 or float16");
}

}  // namespace
}  // namespace vescale
