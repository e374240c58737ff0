// The library's spdlog logger ("fa4rt"). Level from Options / FA4_LOG_LEVEL.
#pragma once

#include <spdlog/spdlog.h>

#include "fa4/fa4.hpp"

namespace fa4::detail {

spdlog::logger& log();
void set_log_level(LogLevel level);
LogLevel parse_log_level(const std::string& text);  // trace|debug|info|warn|error|off; throws on others

}  // namespace fa4::detail
