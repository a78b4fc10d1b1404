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

TEST(Device, CudaWithoutAGpuIsAUserError) {
  EXPECT_THROW(resolve_device("cuda", 0, 0), UserError);
  EXPECT_THROW(resolve_device("cuda", -1, 2), UserError);
}

// NOTE [Ranks sharing a GPU]: more local ranks than GPUs place rank r on cuda:(r mod GPUs).
TEST(Device, MoreLocalRanksThanGpusShareThemRoundRobin) {
  EXPECT_EQ(resolve_device("cuda", 2, 2, 4), Device(c10::kCUDA, 0));
  EXPECT_EQ(resolve_device("auto", 3, 2, 4), Device(c10::kCUDA, 1));
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_EQ(resolve_device("cuda", rank, 1, 4), Device(c10::kCUDA, 0));
  // A node that says it runs no more ranks than GPUs: a rank past them is the launcher's mistake
  // (LOCAL_WORLD_SIZE missing), not a reason to share.
  EXPECT_THROW(resolve_device("cuda", 2, 2, 2), UserError);
  EXPECT_THROW(resolve_device("auto", 4, 4), UserError);
  EXPECT_TRUE(shares_gpus(DeviceSetting::kCuda, 4, 1));
  EXPECT_TRUE(shares_gpus(DeviceSetting::kAuto, 3, 2));
  EXPECT_FALSE(shares_gpus(DeviceSetting::kCuda, 2, 2));
  EXPECT_FALSE(shares_gpus(DeviceSetting::kAuto, 4, 0));  // auto without a GPU: the CPU
  EXPECT_FALSE(shares_gpus(DeviceSetting::kCpu, 4, 1));
  EXPECT_EQ(gpu_sharing_warning(4, 1),
            "[device] 4 local ranks share 1 GPU: local rank r computes on cuda:(r mod 1), 4 ranks "
            "a GPU at most, over Gloo (NCCL takes one rank a GPU); a layout check, not a speed-up "
            "(NOTE [Ranks sharing a GPU])");
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
