#include "server/sse.h"

#include <httplib.h>

#include "core/log.h"
#include "server/http_server.h"
#include "server/json_fields.h"

namespace brisk::server {

std::string sse_data(const nlohmann::json& j) { return "data: " + dump_json(j) + "\n\n"; }

std::string sse_event(const std::string& name, const nlohmann::json& j) {
  return "event: " + name + "\ndata: " + dump_json(j) + "\n\n";
}

void stream_job(httplib::Response& res, std::unique_ptr<GenerationJob> job, SseFormatter fmt,
                std::shared_ptr<void> keep_alive) {
  struct State {
    std::unique_ptr<GenerationJob> job;
    SseFormatter fmt;
    std::shared_ptr<void> keep_alive;
    std::function<bool()> client_gone;
    bool started = false;
    bool finished = false;
    int silent_polls = 0;
  };
  auto st = std::make_shared<State>(State{std::move(job), std::move(fmt), std::move(keep_alive),
                                          client_disconnect_probe()});
  const std::string content_type = st->fmt.content_type;
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      content_type,
      [st](size_t, httplib::DataSink& sink) -> bool {
        try {
          auto write = [&](const std::string& s) { return s.empty() || sink.write(s.data(), s.size()); };
          if (!st->started) {
            st->started = true;
            if (!write(st->fmt.start())) return st->job->cancel(), false;
          }
          std::string out;
          ChoiceEvent ev;
          // Gather what is ready (up to ~50 ms) into one write.
          bool got = st->job->next(ev, std::chrono::milliseconds(250));
          while (got) {
            out += st->fmt.event(ev);
            if (ev.end) st->job->ended++;
            if (st->job->ended >= st->job->n) break;
            got = st->job->next(ev, std::chrono::milliseconds(0));
          }
          if (st->job->ended >= st->job->n) {
            out += st->fmt.finish();
            if (!write(out)) return false;
            st->finished = true;
            sink.done();
            return true;
          }
          if (out.empty()) {
            if (++st->silent_polls < 4) return true;
            st->silent_polls = 0;
            if (st->fmt.keep_alive.empty()) {
              if (st->client_gone && st->client_gone()) return st->job->cancel(), false;
              return true;
            }
            out = st->fmt.keep_alive;
          }
          st->silent_polls = 0;
          if (!write(out)) {
            st->job->cancel();  // client gone: stop generating, free the slot
            return false;
          }
          return true;
        } catch (const std::exception& e) {
          log_error("serve: stream failed: ", e.what());
          st->job->cancel();
          return false;
        }
      },
      [st](bool) { st->job->cancel(); });
}

}  // namespace brisk::server
