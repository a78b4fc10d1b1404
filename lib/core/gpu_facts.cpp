// NOTE [GPU facts from the driver] in gpu_facts.h.
#include "core/gpu_facts.h"

#include <dlfcn.h>

#include <array>

namespace vescale {
namespace {

// The driver API's types and values (cuda.h): CUdevice is an int, CUresult 0 is success.
using CuDeviceGet = int (*)(int* device, int ordinal);
using CuDeviceGetName = int (*)(char* name, int length, int device);
using CuDeviceGetAttribute = int (*)(int* value, int attribute, int device);
constexpr int kCapabilityMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kCapabilityMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR

/// Closes a dlopen handle when it goes.
struct DriverHandle {
  void* handle = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  ~DriverHandle() {
    if (handle != nullptr) ::dlclose(handle);
  }
  template <typename Fn>
  Fn find(const char* name) const {
    return reinterpret_cast<Fn>(::dlsym(handle, name));
  }
};

}  // namespace

GpuFacts gpu_facts(Device device) {
  GpuFacts facts;
  if (!device.is_cuda()) return facts;
  const DriverHandle driver;  // only if this process has loaded it: never loads it
  if (driver.handle == nullptr) return facts;
  const auto get = driver.find<CuDeviceGet>("cuDeviceGet");
  const auto get_name = driver.find<CuDeviceGetName>("cuDeviceGetName");
  const auto get_attribute = driver.find<CuDeviceGetAttribute>("cuDeviceGetAttribute");
  int handle = 0;
  if (get == nullptr || get_name == nullptr || get_attribute == nullptr ||
      get(&handle, device.has_index() ? device.index() : 0) != 0) {
    return facts;
  }
  std::array<char, 256> name{};
  if (get_name(name.data(), static_cast<int>(name.size()) - 1, handle) == 0)
    facts.name = name.data();
  if (get_attribute(&facts.major, kCapabilityMajor, handle) != 0 ||
      get_attribute(&facts.minor, kCapabilityMinor, handle) != 0) {
    facts.major = facts.minor = 0;
  }
  return facts;
}

}  // namespace vescale
