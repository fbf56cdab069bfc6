// Minimal leveled logging to stderr. BRISK_LOG=debug|info|warn|error (default: warn).
#pragma once
#include "core/error.h"

namespace brisk {

enum class LogLevel { debug = 0, info = 1, warn = 2, error = 3, off = 4 };
LogLevel log_level();
void set_log_level(LogLevel level);
void log_write(LogLevel level, const std::string& message);

template <class... Args>
void log_debug(Args&&... a) { if (log_level() <= LogLevel::debug) log_write(LogLevel::debug, str_cat(std::forward<Args>(a)...)); }
template <class... Args>
void log_info(Args&&... a) { if (log_level() <= LogLevel::info) log_write(LogLevel::info, str_cat(std::forward<Args>(a)...)); }
template <class... Args>
void log_warn(Args&&... a) { if (log_level() <= LogLevel::warn) log_write(LogLevel::warn, str_cat(std::forward<Args>(a)...)); }
template <class... Args>
void log_error(Args&&... a) { if (log_level() <= LogLevel::error) log_write(LogLevel::error, str_cat(std::forward<Args>(a)...)); }

}  // namespace brisk
