#include "core/device.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace vescale {
namespace {

TEST(Device, CpuIsCpuEverywhere) {
  EXPECT_EQ(resolve_device("cpu", 0, 0), kCpu);
  EXPECT_EQ(resolve_device("cpu", 3, 8), kCpu);
  EXPECT_TRUE(kCpu.is_cpu());
}

TEST(Device, AutoPicksTheRanksGpuWhenThereIsOne) {
  EXPECT_EQ(resolve_device("auto", 0, 0), kCpu);
  EXPECT_EQ(resolve_device("auto", 1, 2), Device(c10::kCUDA, 1));
  EXPECT_EQ(resolve_device("cuda", 0, 1), Device(c10::kCUDA, 0));
  EXPECT_EQ(resolve_device("cuda", 0, 1).str(), "cuda:0");
}

TEST(Device, CudaWithoutAGpuForTheRankIsAUserError) {
  EXPECT_THROW(resolve_device("cuda", 0, 0), UserError);
  EXPECT_THROW(resolve_device("cuda", 2, 2), UserError);
  EXPECT_THROW(resolve_device("auto", 2, 2), UserError);
  EXPECT_THROW(resolve_device("cuda", -1, 2), UserError);
}

TEST(Device, CudaWithoutAnyGpuSaysNoneIsVisible) {
  try {
    resolve_device("cuda", 0, 0);
    FAIL() << "no error";
  } catch (const UserError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("training.device = 'cuda'"), std::string::npos) << message;
    EXPECT_NE(message.find("no GPU is visible"), std::string::npos) << message;
  }
}

TEST(Device, BindingTheCpuDoesNothing) {
  EXPECT_NO_THROW(bind_device(kCpu));
}

TEST(Device, UnknownSettingSuggestsTheNearest) {
  try {
    resolve_device("cudda", 0, 0);
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("training.device"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("did you mean 'cuda'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(resolve_device("gpu", 0, 0), UserError);
  EXPECT_THROW(resolve_device("", 0, 0), UserError);
}

TEST(Device, ParseUsesTheGpusThisProcessSees) {
  const int gpus = cuda_device_count();
  EXPECT_EQ(parse_device("auto", 0), gpus > 0 ? Device(c10::kCUDA, 0) : kCpu);
  EXPECT_EQ(parse_device("cpu", 0), kCpu);
  if (gpus == 0) {
    EXPECT_THROW(parse_device("cuda", 0), UserError);
  } else {
    EXPECT_EQ(parse_device("cuda", 0), Device(c10::kCUDA, 0));
  }
}

}  // namespace
}  // namespace vescale
