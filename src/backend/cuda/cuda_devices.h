#pragma once
#include <string>
#include <vector>

#include "backend/devices.h"

namespace brisk::cuda {
std::vector<DeviceInfo> enumerate_devices(std::string* reason);
}
