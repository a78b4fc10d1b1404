#include "core/config_value.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace vescale {
namespace {

TEST(NumberText, AsPeopleWriteThem) {
  EXPECT_EQ(number_text(3e-4), "0.0003");
  EXPECT_EQ(number_text(0.1), "0.1");
  EXPECT_EQ(number_text(0.95), "0.95");
  EXPECT_EQ(number_text(1e-8), "1e-8");
  EXPECT_EQ(number_text(2.5e-10), "2.5e-10");
  EXPECT_EQ(number_text(65536), "65536");
  EXPECT_EQ(number_text(300), "300");
  EXPECT_EQ(number_text(1e12), "1e12");
  EXPECT_EQ(number_text(2500000), "2500000");  // five zeros: as written
  EXPECT_EQ(number_text(25000000), "2.5e7");
  EXPECT_EQ(number_text(-1e20), "-1e20");
  EXPECT_EQ(number_text(0), "0");
}

TEST(NumberText, ReadsBackExactly) {
  for (double v : {3e-4, 0.1, 1.0 / 3, 6e-4 * 0.1, 1e-8, 1e12, 123456789.0, 2.0 / 7e9}) {
    const std::string text = number_text(v);
    EXPECT_EQ(std::strtod(text.c_str(), nullptr), v) << text;
  }
}

TEST(ConfigRange, PrintsItsBoundsAsNumbers) {
  EXPECT_EQ(within(1, 1e12).str(), "in [1, 1e12]");
  EXPECT_EQ(within_open_lo(0, 1).str(), "in (0, 1]");
  EXPECT_EQ(above(0).str(), "> 0");
}

}  // namespace
}  // namespace vescale
