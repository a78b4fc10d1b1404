// Precompiled header: the expensive third-party headers every translation unit uses.
// Not for project headers: those change often and would invalidate it.
#pragma once

#include <torch/torch.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>
