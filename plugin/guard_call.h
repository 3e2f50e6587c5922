// guard_call: the one mapping from C++ exceptions to the C ABI's mlav_status (c_api.h "Errors"),
// shared by every C entry point mlaverify writes over C++ (export_backend and the plugins built on
// it, capi/).
#pragma once

#include <cstddef>
#include <exception>
#include <type_traits>

#include "mlaverify/c_api.h"
#include "mlaverify/error.h"
#include "plugin/plugin_backend.h"

namespace mlaverify::plugin {

// Runs body and returns MLAV_OK, or body's own status when it returns one (an entry point that
// answers MLAV_UNSUPPORTED with its reason itself). An exception must not cross the C frame, so
// each becomes the status the ABI names and its what() the message in err: InvalidInput ->
// MLAV_INVALID_INPUT, Unsupported -> MLAV_UNSUPPORTED, anything else -> MLAV_ERROR. A caller with
// an exception type of its own to map catches it inside body (capi/ does, for JSON's).
template <typename F>
mlav_status guard_call(char* err, size_t err_size, F&& body) {
  try {
    if constexpr (std::is_void_v<std::invoke_result_t<F&>>) {
      body();
      return MLAV_OK;
    } else {
      return body();
    }
  } catch (const InvalidInput& e) {
    write_error(err, err_size, e.what());
    return MLAV_INVALID_INPUT;
  } catch (const Unsupported& e) {
    write_error(err, err_size, e.what());
    return MLAV_UNSUPPORTED;
  } catch (const std::exception& e) {
    write_error(err, err_size, e.what());
    return MLAV_ERROR;
  } catch (...) {
    write_error(err, err_size, "unknown exception");
    return MLAV_ERROR;
  }
}

}  // namespace mlaverify::plugin
