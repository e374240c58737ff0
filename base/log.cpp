#include "base/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace fa4::detail {

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = std::make_shared<spdlog::logger>(
        "fa4rt", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    l->set_pattern("[%H:%M:%S.%e] [fa4rt] [%^%l%$] %v");
    l->set_level(spdlog::level::info);
    return l;
  }();
  return *logger;
}

void set_log_level(LogLevel level) {
  static constexpr spdlog::level::level_enum map[] = {
      spdlog::level::trace, spdlog::level::debug, spdlog::level::info,
      spdlog::level::warn,  spdlog::level::err,   spdlog::level::off};
  log().set_level(map[static_cast<int>(level)]);
}

LogLevel parse_log_level(const std::string& text) {
  static const std::pair<const char*, LogLevel> names[] = {
      {"trace", LogLevel::trace}, {"debug", LogLevel::debug}, {"info", LogLevel::info},
      {"warn", LogLevel::warn},   {"error", LogLevel::error}, {"off", LogLevel::off}};
  for (const auto& [name, level] : names)
    if (text == name) return level;
  throw Error(ErrorCode::invalid_argument,
              "log level '" + text + "': must be one of trace, debug, info, warn, error, off");
}

}  // namespace fa4::detail
