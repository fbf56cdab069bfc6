// Detects that the client of a non-streamed request has gone away while its generation runs.
// The HTTP library gives handlers no socket, so the probe finds the connection's descriptor
// once (the socket whose local and peer ports are the request's) and then asks poll() for
// POLLRDHUP/POLLHUP, which report a peer that closed or reset the connection.
#pragma once
#include <functional>
#include <string>

namespace brisk::server {

// Returns a cheap check "has the client disconnected?"; a check that always answers false
// when the connection's socket cannot be identified.
std::function<bool()> client_disconnect_probe(const std::string& remote_addr, int remote_port, int local_port);

}  // namespace brisk::server
