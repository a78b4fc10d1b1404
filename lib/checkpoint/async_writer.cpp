#include "checkpoint/async_writer.h"

#include <spdlog/spdlog.h>

#include <utility>

namespace vescale {

AsyncWriter::~AsyncWriter() {
  try {
    wait();
  } catch (const std::exception& e) {
    spdlog::error("[checkpoint] the background checkpoint write failed: {}", e.what());
  }
}

void AsyncWriter::start(std::function<void()> write) {
  wait();
  thread_ = std::thread([this, write = std::move(write)] {
    try {
      write();
    } catch (...) {
      error_ = std::current_exception();  // read by wait() after join(), which orders it
    }
  });
}

void AsyncWriter::wait() {
  if (thread_.joinable()) thread_.join();
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

}  // namespace vescale
