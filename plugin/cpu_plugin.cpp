// libmlaverify_cpu_plugin.so: the CPU backend (cpu/cpu_backend.h) as a plugin over host memory,
// built with export_backend: the few lines any C++ Backend needs to become a plugin. Config:
// "threads=N" (worker threads; default: the hardware's), "folded" (the folded split plan).
#include <cstdlib>
#include <string>
#include <string_view>

#include "cpu/cpu_backend.h"
#include "mlaverify/c_api.h"
#include "mlaverify/error.h"
#include "plugin/plugin_backend.h"

extern "C" MLAV_EXPORT mlav_status mlav_plugin_open(uint32_t abi_version, const char* config,
                                                    mlav_backend* out, char* err, size_t err_size) {
  using namespace mlaverify;
  return plugin::open_exported(abi_version, config, out, err, err_size, [](std::string_view cfg) {
    cpu::CpuOptions options;
    while (!cfg.empty()) {
      const size_t amp = cfg.find('&');
      const std::string item(cfg.substr(0, amp));
      cfg = amp == std::string_view::npos ? std::string_view() : cfg.substr(amp + 1);
      if (item == "folded") {
        options.folded = true;
      } else if (item.rfind("threads=", 0) == 0) {
        char* end = nullptr;
        const long n = std::strtol(item.c_str() + 8, &end, 10);
        if (end == item.c_str() + 8 || *end != '\0' || n < 0 || n > 1024) {
          throw InvalidInput("config", -1, "cpu plugin: '" + item + "': threads is 0..1024");
        }
        options.threads = static_cast<int>(n);
      } else if (!item.empty()) {
        throw InvalidInput("config", -1,
                           "cpu plugin: unknown item '" + item + "' (known: threads=N, folded)");
      }
    }
    return cpu::make_cpu_backend(options);
  });
}
