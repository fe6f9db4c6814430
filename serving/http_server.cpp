#include "serving/http_server.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <ctime>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>

#include "mygpt/chat_page.h"
#include "serving/api_response.h"

namespace mygpt {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Request = http::request<http::string_body>;

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

// The same time to compare a key whatever its first wrong byte (no timing hint of how much matched).
bool same_key(std::string_view given, std::string_view key) {
  unsigned char diff = given.size() == key.size() ? 0 : 1;
  for (size_t i = 0; i < given.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ key[i % key.size()]);
  return diff == 0;
}

class Server;

// One client connection: requests read one after another (keep-alive), each answered whole or streamed.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Server& server) : stream_(std::move(socket)), server_(server) {}
  ~Session() {
    if (job_) job_->cancelled.store(true);  // the server is stopping: nothing will read this reply
  }
  void start() { read_request(); }
  // New text or the end of the job: write what there is (on the I/O thread).
  void pump();

 private:
  void read_request();
  void on_header(beast::error_code ec);
  void read_body();
  void on_request(beast::error_code ec);
  void refuse_unreadable(beast::error_code ec);
  void handle(Request request);
  void start_completion(const Request& request, Endpoint endpoint);
  void send(http::status status, std::string body, const char* content_type, bool keep_alive);
  void send_error(const ApiError& error, bool keep_alive);
  void watch_for_hangup();
  void write_stream_header();
  void end_job();
  void close();
  // Closes after reading (and dropping) what the client still sends, for a while: a client still sending
  // a refused body then reads the refusal instead of a reset connection.
  void linger_close();

  beast::tcp_stream stream_;
  Server& server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool linger_ = false;
  std::array<char, 16384> drain_{};

  // The request being answered.
  std::shared_ptr<Job> job_;
  uint64_t job_number_ = 0;  // tells a hang-up watch of an earlier request from this one's
  ResponseHead head_{};
  bool streaming_ = false;
  bool include_usage_ = false;
  int64_t prompt_tokens_ = 0;
  bool writing_ = false;
  bool header_written_ = false;
  bool role_sent_ = false;
  bool last_written_ = false;
  std::string reply_;    // a whole reply's text so far
  std::string pending_;  // the bytes being written
  std::optional<http::response<http::empty_body>> stream_response_;
  std::optional<http::response_serializer<http::empty_body>> stream_serializer_;
};

class Server {
 public:
  Server(const ServedModel& served, const ServerOptions& options, std::function<void(const std::string&)> log)
      : served_(served),
        options_(options),
        log_(std::move(log)),
        acceptor_(ioc_),
        signals_(ioc_, SIGTERM, SIGINT),
        scheduler_(served.model, served.decode_id, options.max_batch, options.max_queue) {}

  std::string listen() {
    beast::error_code ec;
    const auto address = net::ip::make_address(options_.host, ec);
    if (ec) throw std::invalid_argument("--host '" + options_.host + "' is not an IP address: " + ec.message());
    const tcp::endpoint endpoint(address, options_.port);
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      throw std::invalid_argument("--host " + options_.host + " --port " + std::to_string(options_.port) +
                                  ": cannot listen there: " + ec.message());
    }
    const tcp::endpoint bound = acceptor_.local_endpoint();
    const std::string host = bound.address().is_v6() ? "[" + bound.address().to_string() + "]" : bound.address().to_string();
    return "http://" + host + ":" + std::to_string(bound.port());
  }

  void run() {
    signals_.async_wait([this](beast::error_code ec, int signal) {
      if (!ec) stop(signal);
    });
    accept();
    ioc_.run();
  }

  const ServedModel& served() const { return served_; }
  const ServerOptions& options() const { return options_; }
  BatchScheduler& scheduler() { return scheduler_; }
  bool stopping() const { return stopping_; }
  std::string next_id(Endpoint endpoint) {
    return std::string(endpoint == Endpoint::chat_completions ? "chatcmpl-" : "cmpl-") + std::to_string(++requests_) +
           "-" + std::to_string(random_());
  }
  // Replies being answered: the server stops once the scheduler is done and these are all written.
  void reply_started() { ++replying_; }
  void reply_ended() { --replying_; }
  void log(const std::string& line) { log_(line); }

 private:
  void accept() {
    acceptor_.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (!acceptor_.is_open()) return;
      if (!ec) std::make_shared<Session>(std::move(socket), *this)->start();
      accept();
    });
  }

  void stop(int signal) {
    stopping_ = true;
    const auto [decoding, waiting] = scheduler_.load();
    log_(std::string(signal == SIGTERM ? "SIGTERM" : "SIGINT") + ": no new connections; " + std::to_string(decoding) +
         " request(s) decoding and " + std::to_string(waiting) + " waiting get up to " +
         std::to_string(options_.shutdown_grace_s) + " s to finish");
    beast::error_code ignored;
    acceptor_.close(ignored);
    scheduler_.shut_down(millis(options_.shutdown_grace_s));
    hard_deadline_ = std::chrono::steady_clock::now() + millis(options_.shutdown_grace_s + 5);
    poll_shutdown();
  }

  // Waits for the scheduler to finish and the last replies to be written (or, past a bound, for nothing).
  void poll_shutdown() {
    if ((scheduler_.finished() && replying_ == 0) || std::chrono::steady_clock::now() > hard_deadline_) {
      ioc_.stop();
      return;
    }
    poll_timer_.expires_after(std::chrono::milliseconds(20));
    poll_timer_.async_wait([this](beast::error_code) { poll_shutdown(); });
  }

  const ServedModel& served_;
  const ServerOptions& options_;
  std::function<void(const std::string&)> log_;
  // Declared before the scheduler: the scheduler's thread posts to it until the scheduler is destroyed.
  net::io_context ioc_{1};
  tcp::acceptor acceptor_;
  net::signal_set signals_;
  net::steady_timer poll_timer_{ioc_};
  std::chrono::steady_clock::time_point hard_deadline_{};
  bool stopping_ = false;
  int64_t replying_ = 0;
  uint64_t requests_ = 0;
  std::mt19937_64 random_{std::random_device{}()};
  BatchScheduler scheduler_;
};

void Session::read_request() {
  parser_.emplace();
  parser_->body_limit(static_cast<uint64_t>(server_.options().limits.max_body_bytes));
  stream_.expires_after(millis(server_.options().idle_timeout_s));
  http::async_read_header(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
    self->on_header(ec);
  });
}

void Session::on_header(beast::error_code ec) {
  if (ec) return refuse_unreadable(ec);
  const auto& request = parser_->get();
  if (beast::iequals(request[http::field::expect], "100-continue")) {
    // curl asks before it sends a body over 1 KiB: say go on (a body too large was refused above).
    auto go_on = std::make_shared<http::response<http::empty_body>>(http::status::continue_, request.version());
    http::async_write(stream_, *go_on, [self = shared_from_this(), go_on](beast::error_code ec, size_t) {
      if (ec) return self->close();
      self->read_body();
    });
    return;
  }
  read_body();
}

void Session::read_body() {
  http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
    self->on_request(ec);
  });
}

void Session::on_request(beast::error_code ec) {
  if (ec) return refuse_unreadable(ec);
  stream_.expires_never();
  handle(parser_->release());
}

void Session::refuse_unreadable(beast::error_code ec) {
  if (ec == http::error::body_limit) {
    // The body is not read: answered, the connection closes (after the client has sent it).
    linger_ = true;
    return send_error(ApiError(413,
                               "the request body is larger than this server's limit of " +
                                   std::to_string(server_.options().limits.max_body_bytes) + " bytes",
                               "invalid_request_error", "", "request_too_large"),
                      /*keep_alive=*/false);
  }
  if (ec.category() == http::make_error_code(http::error::bad_target).category() && ec != http::error::end_of_stream &&
      ec != http::error::partial_message) {
    return send_error(invalid_request(std::string("malformed HTTP request: ") + ec.message()), /*keep_alive=*/false);
  }
  close();  // the client closed the connection, or sent nothing in time
}

void Session::handle(Request request) {
  version_ = request.version();
  keep_alive_ = request.keep_alive();
  std::string_view target(request.target().data(), request.target().size());
  target = target.substr(0, target.find('?'));
  const auto method = request.method();
  if (method == http::verb::get && (target == "/" || target == "/index.html")) {
    return send(http::status::ok, std::string(kChatPage), "text/html; charset=utf-8", keep_alive_);
  }
  if (method == http::verb::get && target == "/health") {
    // How busy it is, too: requests decoding now and waiting for a place.
    const auto [decoding, waiting] = server_.scheduler().load();
    return send(http::status::ok,
                "{\"status\":\"ok\",\"decoding\":" + std::to_string(decoding) + ",\"waiting\":" +
                    std::to_string(waiting) + "}",
                "application/json", keep_alive_);
  }
  const bool api = target.rfind("/v1/", 0) == 0;
  if (api && !server_.options().api_key.empty()) {
    const std::string_view given(request[http::field::authorization].data(), request[http::field::authorization].size());
    const std::string_view bearer = "Bearer ";
    if (given.rfind(bearer, 0) != 0 || !same_key(given.substr(bearer.size()), server_.options().api_key)) {
      return send_error(ApiError(401,
                                 given.empty() ? "you did not provide an API key: send 'Authorization: Bearer KEY'"
                                               : "incorrect API key provided",
                                 "invalid_request_error", "", "invalid_api_key"),
                        keep_alive_);
    }
  }
  if (method == http::verb::get && target == "/v1/models") {
    return send(http::status::ok, models_json(server_.served().name, std::time(nullptr)), "application/json",
                keep_alive_);
  }
  if (method == http::verb::post && target == "/v1/chat/completions") {
    return start_completion(request, Endpoint::chat_completions);
  }
  if (method == http::verb::post && target == "/v1/completions") return start_completion(request, Endpoint::completions);
  const auto method_name = request.method_string();
  send_error(ApiError(404, "unknown request URL: " + std::string(method_name.data(), method_name.size()) + " " +
                               std::string(target),
                      "invalid_request_error", "", "unknown_url"),
             keep_alive_);
}

void Session::start_completion(const Request& request, Endpoint endpoint) {
  CompletionRequest parsed;
  try {
    parsed = parse_completion_request(request.body(), endpoint);
    if (parsed.model != server_.served().name) {
      throw ApiError(404, "the model '" + parsed.model + "' does not exist: this server serves '" +
                              server_.served().name + "'",
                     "invalid_request_error", "model", "model_not_found");
    }
    job_ = make_completion_job(parsed, server_.served(), server_.options().limits);
  } catch (const ApiError& e) {
    return send_error(e, keep_alive_);
  }
  job_->notify = [weak = weak_from_this(), executor = stream_.get_executor()] {
    net::post(executor, [weak] {
      if (auto self = weak.lock()) self->pump();
    });
  };
  if (server_.stopping() || !server_.scheduler().submit(job_)) {
    job_.reset();
    if (server_.stopping()) return send_error(ApiError(503, "the server is shutting down", "server_error"), false);
    const auto [decoding, waiting] = server_.scheduler().load();
    return send_error(ApiError(429,
                               "the server is busy: " + std::to_string(decoding) + " requests decoding and " +
                                   std::to_string(waiting) + " waiting (--max-queue); retry later",
                               "rate_limit_error", "", "queue_full"),
                      keep_alive_);
  }
  server_.reply_started();
  ++job_number_;
  head_ = ResponseHead{endpoint, server_.next_id(endpoint), static_cast<int64_t>(std::time(nullptr)), parsed.model};
  streaming_ = parsed.stream;
  include_usage_ = parsed.include_usage;
  prompt_tokens_ = static_cast<int64_t>(job_->prompt.size());
  header_written_ = role_sent_ = last_written_ = false;
  reply_.clear();
  watch_for_hangup();
  if (streaming_) {
    write_stream_header();
  } else {
    stream_.expires_never();  // the reply may take a while; the hang-up watch sees a client that leaves
  }
}

// A client that closes its connection while its reply is decoded (not only when the next write fails):
// the socket turns readable at its FIN, and a peek reads 0 bytes.
void Session::watch_for_hangup() {
  // The watch also keeps the session alive while its reply is decoded (nothing else is pending then).
  stream_.socket().async_wait(
      tcp::socket::wait_read, [self = shared_from_this(), number = job_number_](beast::error_code ec) {
        if (ec || !self->job_ || self->job_number_ != number) return;
        char byte;
        beast::error_code peek;
        const size_t n = self->stream_.socket().receive(net::buffer(&byte, 1), tcp::socket::message_peek, peek);
        if (n == 0 || peek) {
          self->end_job();  // cancels it: its place in the batch is free at the next step
          self->close();
        }
        // Bytes of a next request (pipelined) wait in the socket: read after this reply.
      });
}

void Session::write_stream_header() {
  stream_response_.emplace(http::status::ok, version_);
  stream_response_->set(http::field::content_type, "text/event-stream");
  stream_response_->set(http::field::cache_control, "no-cache");
  stream_response_->keep_alive(keep_alive_);
  stream_response_->chunked(true);
  stream_serializer_.emplace(*stream_response_);
  writing_ = true;
  stream_.expires_after(millis(server_.options().write_timeout_s));
  http::async_write_header(stream_, *stream_serializer_, [self = shared_from_this()](beast::error_code ec, size_t) {
    self->writing_ = false;
    self->stream_.expires_never();  // no timeout while the next tokens are decoded
    if (ec) return self->end_job();
    self->header_written_ = true;
    self->pump();
  });
}

void Session::pump() {
  if (!job_ || writing_ || (streaming_ && !header_written_)) return;
  std::string text;
  bool done = false;
  std::string finish_reason;
  std::optional<ApiError> error;
  int64_t completion_tokens = 0;
  {
    std::lock_guard lock(job_->mutex);
    text.swap(job_->text);
    done = job_->done;
    finish_reason = job_->finish_reason;
    error = job_->error;
    completion_tokens = job_->completion_tokens;
  }
  const Usage usage{prompt_tokens_, completion_tokens};
  if (!streaming_) {
    reply_ += text;
    if (!done) return;
    end_job();
    if (error) return send_error(*error, keep_alive_);
    return send(http::status::ok, completion_json(head_, reply_, finish_reason, usage), "application/json", keep_alive_);
  }
  std::string events;
  if (!role_sent_ && head_.endpoint == Endpoint::chat_completions) events += role_event(head_);
  role_sent_ = true;
  if (!text.empty()) events += text_event(head_, text);
  if (done) {
    if (error) {
      events += error_event(*error);
    } else {
      events += finish_event(head_, finish_reason);
      if (include_usage_) events += usage_event(head_, usage);
    }
    events += kDoneEvent;
    last_written_ = true;
  }
  if (events.empty()) return;
  pending_ = std::move(events);
  writing_ = true;
  // A client that reads nothing for that long is dropped (its reply would otherwise pile up here).
  stream_.expires_after(millis(server_.options().write_timeout_s));
  net::async_write(stream_, http::make_chunk(net::buffer(pending_)),
                   [self = shared_from_this()](beast::error_code ec, size_t) {
                     self->writing_ = false;
                     self->stream_.expires_never();
                     if (ec) return self->end_job(), self->close();
                     if (!self->last_written_) return self->pump();
                     self->writing_ = true;
                     net::async_write(self->stream_, http::make_chunk_last(),
                                      [self](beast::error_code ec, size_t) {
                                        self->writing_ = false;
                                        self->end_job();
                                        if (ec || !self->keep_alive_) return self->close();
                                        self->read_request();
                                      });
                   });
}

void Session::end_job() {
  if (!job_) return;
  {
    std::lock_guard lock(job_->mutex);
    if (!job_->done) job_->cancelled.store(true);
  }
  job_.reset();
  server_.reply_ended();
}

void Session::send(http::status status, std::string body, const char* content_type, bool keep_alive) {
  auto response = std::make_shared<http::response<http::string_body>>(status, version_);
  response->set(http::field::content_type, content_type);
  if (status == http::status::too_many_requests) response->set(http::field::retry_after, "1");
  response->keep_alive(keep_alive);
  response->body() = std::move(body);
  response->prepare_payload();
  stream_.expires_after(millis(server_.options().write_timeout_s));
  http::async_write(stream_, *response, [self = shared_from_this(), response](beast::error_code ec, size_t) {
    if (ec) return self->close();
    if (!response->keep_alive()) return self->linger_ ? self->linger_close() : self->close();
    self->read_request();
  });
}

void Session::send_error(const ApiError& error, bool keep_alive) {
  send(static_cast<http::status>(error.status), error_json(error), "application/json", keep_alive);
}

void Session::linger_close() {
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  stream_.expires_after(std::chrono::seconds(10));
  stream_.async_read_some(net::buffer(drain_), [self = shared_from_this()](beast::error_code ec, size_t) {
    if (ec) return self->close();
    self->linger_close();
  });
}

void Session::close() {
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.socket().close(ignored);
}

}  // namespace

void serve_http(const ServedModel& served, const ServerOptions& options,
                const std::function<void(const std::string& address)>& on_listening,
                const std::function<void(const std::string& line)>& log) {
  Server server(served, options, log);
  on_listening(server.listen());
  server.run();
}

}  // namespace mygpt
