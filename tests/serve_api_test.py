"""`mygpt-ddp serve` through the official openai client (PyPI), against a running server on a small trained
chat model: chat and completions, whole and streamed; usage counts (the prompt's against GPT-2's tokenizer
in `tokenizers`); stop strings; errors as the client raises them (bad JSON, unknown model, wrong key,
oversized body, n != 1, a full queue); 32 concurrent clients all answered, their greedy texts equal to the
same requests made one at a time and to `generate`'s and `chat`'s; a client that never reads and one that
vanishes block nobody; SIGTERM ends the server with exit 0 after answering what was in flight.

usage: serve_api_test.py MYGPT_DDP CHECKPOINT GPT2_DIR WORK_DIR
Prints PASS/FAIL lines; exit 1 on any failure."""
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import openai
from tokenizers import ByteLevelBPETokenizer

BIN, CKPT, GPT2_DIR, WORK = sys.argv[1:5]
MODEL = "tiny-chat"
KEY = "sk-test-123"
failures = 0


def check(name, ok, detail=""):
    global failures
    print(("PASS: " if ok else "FAIL: ") + name + ("" if ok or not detail else " -- " + str(detail)[:600]), flush=True)
    failures += 0 if ok else 1


class Server:
    """A `serve` process on a free port; its stdout's first line names the address."""

    def __init__(self, *extra, key=KEY):
        args = [BIN, "serve", "--checkpoint", CKPT, "--port", "0", "--device", "cpu", "--threads", "1",
                "--model-name", MODEL, *extra]
        if key:
            args += ["--api-key", key]
        self.log = open(os.path.join(WORK, f"server_{time.monotonic_ns()}.err"), "w")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("serving on "):
            raise RuntimeError(f"the server did not start: {line!r} (see {self.log.name})")
        self.url = line.split()[2]
        self.port = int(self.url.rsplit(":", 1)[1])

    def client(self, key=KEY, **kw):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=key or "none", max_retries=0, timeout=120, **kw)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return None


def raw(server, method, path, body=None, headers=None):
    """(status, parsed JSON) of a plain HTTP request: what the client cannot send (bad JSON)."""
    request = urllib.request.Request(server.url + path, data=body, method=method,
                                     headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json",
                                              **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def is_error_object(body):
    return (isinstance(body, dict) and set(body) == {"error"} and
            set(body["error"]) == {"message", "type", "param", "code"} and bool(body["error"]["message"]))


tokenizer = ByteLevelBPETokenizer(os.path.join(GPT2_DIR, "encoder.json"), os.path.join(GPT2_DIR, "vocab.bpe"))
server = Server("--max-batch", "8", "--max-queue", "64")
client = server.client()

# --- the model list, health ------------------------------------------------------------------------------
models = client.models.list()
check("GET /v1/models lists the model", [m.id for m in models.data] == [MODEL], models)
status, health = raw(server, "GET", "/health")
check("GET /health answers ok", status == 200 and health.get("status") == "ok", health)

# --- chat: whole, streamed, usage -------------------------------------------------------------------------
USER = "reverse abc"
chat = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": USER}], temperature=0,
                                      max_tokens=24)
reply = chat.choices[0].message.content
check(f"chat completion: a reply ({reply!r}), finish_reason {chat.choices[0].finish_reason}",
      chat.object == "chat.completion" and chat.choices[0].message.role == "assistant" and
      chat.choices[0].finish_reason in ("stop", "length"), chat)
# <|bos|><|user_start|> text <|user_end|><|assistant_start|>
expected_prompt = 4 + len(tokenizer.encode(USER).ids)
check(f"chat usage: prompt_tokens {chat.usage.prompt_tokens} = 4 chat tokens + GPT-2's count of the message",
      chat.usage.prompt_tokens == expected_prompt, chat.usage)
check("chat usage: total = prompt + completion, completion within max_tokens",
      chat.usage.total_tokens == chat.usage.prompt_tokens + chat.usage.completion_tokens and
      0 < chat.usage.completion_tokens <= 24, chat.usage)
if chat.choices[0].finish_reason == "length":
    check("finish_reason length: exactly max_tokens drawn", chat.usage.completion_tokens == 24, chat.usage)

# A "developer" message (OpenAI's newer name for the system message) is taken as the system's.
SYSTEM = "Answer briefly."
as_system, as_developer = (
    client.chat.completions.create(model=MODEL, messages=[{"role": role, "content": SYSTEM},
                                                          {"role": "user", "content": USER}],
                                   temperature=0, max_tokens=12)
    for role in ("system", "developer"))
check("a developer message is the system message: the same prompt and reply",
      as_developer.usage.model_dump() == as_system.usage.model_dump() and
      as_developer.choices[0].message.content == as_system.choices[0].message.content, (as_system, as_developer))

chunks = list(client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": USER}],
                                             temperature=0, max_tokens=24, stream=True,
                                             stream_options={"include_usage": True}))
streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
check(f"chat streamed in {len(chunks)} chunks equals the whole reply", streamed == reply, (streamed, reply))
check("... the first chunk carries the role, one finish_reason at the end",
      chunks[0].choices[0].delta.role == "assistant" and finishes == [chat.choices[0].finish_reason], finishes)
check("... the usage chunk (include_usage) equals the whole reply's usage",
      chunks[-1].usage is not None and chunks[-1].choices == [] and
      chunks[-1].usage.model_dump() == chat.usage.model_dump(), chunks[-1])

# --- completions --------------------------------------------------------------------------------------------
PROMPT = "The quick brown fox"
comp = client.completions.create(model=MODEL, prompt=PROMPT, temperature=0, max_tokens=30)
text = comp.choices[0].text
check(f"completion: {text!r}, finish_reason {comp.choices[0].finish_reason}",
      comp.object == "text_completion" and comp.choices[0].finish_reason in ("stop", "length"), comp)
check("completion usage: prompt_tokens = GPT-2's count of the prompt",
      comp.usage.prompt_tokens == len(tokenizer.encode(PROMPT).ids), comp.usage)
check("completion usage: length means max_tokens tokens",
      comp.choices[0].finish_reason != "length" or comp.usage.completion_tokens == 30, comp.usage)
streamed = "".join(c.choices[0].text for c in client.completions.create(
    model=MODEL, prompt=PROMPT, temperature=0, max_tokens=30, stream=True) if c.choices)
check("completion streamed equals the whole one", streamed == text, (streamed, text))

# --- stop strings -------------------------------------------------------------------------------------------
long_text = client.completions.create(model=MODEL, prompt=PROMPT, temperature=0, max_tokens=60).choices[0].text
stop = next((long_text[i:i + 3] for i in range(8, len(long_text) - 3) if long_text[i:i + 3].strip()), None)
if stop is None:
    check("a stop string to test with in the greedy text", False, long_text)
else:
    cut = long_text[:long_text.index(stop)]
    stopped = client.completions.create(model=MODEL, prompt=PROMPT, temperature=0, max_tokens=60, stop=[stop, "\x01"])
    check(f"stop {stop!r}: the text ends before it ({stopped.choices[0].text!r}), finish_reason stop",
          stopped.choices[0].text == cut and stopped.choices[0].finish_reason == "stop", stopped)
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model=MODEL, prompt=PROMPT, temperature=0, max_tokens=60, stop=stop, stream=True) if c.choices)
    check("... streamed, no part of the stop string shown", streamed == cut, (streamed, cut))

# --- sampling: a seed gives the same reply; temperature, top_p, top_k accepted --------------------------------
sampled = [client.completions.create(model=MODEL, prompt=PROMPT, temperature=1.0, top_p=0.9, max_tokens=20, seed=5,
                                     extra_body={"top_k": 40}).choices[0].text for _ in range(2)]
check("the same seed samples the same text", sampled[0] == sampled[1], sampled)

# --- errors as the client raises them -----------------------------------------------------------------------
def raises(name, error_type, call, status=None, needle=None):
    try:
        call()
    except error_type as e:
        body = getattr(e, "body", None)
        ok = (status is None or e.status_code == status) and (needle is None or needle in str(e))
        check(f"{name}: {type(e).__name__} {getattr(e, 'status_code', '')}: {str(e)[:160]}", ok, body)
        return
    except Exception as e:  # noqa: BLE001 - any other is a failure, named
        check(f"{name}: raises {error_type.__name__}", False, repr(e))
        return
    check(f"{name}: raises {error_type.__name__}", False, "no error")


msgs = [{"role": "user", "content": "hi"}]
raises("unknown model", openai.NotFoundError,
       lambda: client.chat.completions.create(model="gpt-4", messages=msgs), 404, "gpt-4")
raises("wrong API key", openai.AuthenticationError,
       lambda: server.client(key="sk-wrong").chat.completions.create(model=MODEL, messages=msgs), 401)
status, body = raw(server, "GET", "/v1/models", headers={"Authorization": ""})
check("no API key: 401 with the error object", status == 401 and is_error_object(body), body)
raises("n = 2", openai.BadRequestError,
       lambda: client.chat.completions.create(model=MODEL, messages=msgs, n=2), 400, "n")
raises("temperature out of range", openai.BadRequestError,
       lambda: client.chat.completions.create(model=MODEL, messages=msgs, temperature=5), 400, "temperature")
raises("max_tokens past the context", openai.BadRequestError,
       lambda: client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=100000), 400, "max_tokens")
raises("a prompt longer than the context", openai.BadRequestError,
       lambda: client.completions.create(model=MODEL, prompt="word " * 2000, max_tokens=1), 400, "context")
raises("oversized body (413)", openai.APIStatusError,
       lambda: client.completions.create(model=MODEL, prompt="x" * (2 << 20), max_tokens=1), 413, "limit")
status, body = raw(server, "POST", "/v1/chat/completions", b'{"model": "tiny-chat", "messages": [')
check(f"bad JSON: 400 with the error object ({body['error']['message'][:80] if is_error_object(body) else body})",
      status == 400 and is_error_object(body) and body["error"]["type"] == "invalid_request_error", body)
status, body = raw(server, "GET", "/v1/nothing")
check("an unknown URL: 404 with the error object", status == 404 and is_error_object(body), body)
status, body = raw(server, "POST", "/v1/completions", json.dumps({"model": MODEL, "prompt": "a", "bogus": 1}).encode())
check("an unknown field: 400 naming it", status == 400 and is_error_object(body) and body["error"]["param"] == "bogus",
      body)
check("the server goes on after every error", client.models.list().data[0].id == MODEL)

# --- 32 concurrent clients: all answered, greedy texts as one at a time, as generate's and chat's --------------
def request(i):
    if i % 2:
        r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": f"reverse word{i}"}],
                                           temperature=0, max_tokens=20 + i)
        return r.choices[0].message.content
    r = client.completions.create(model=MODEL, prompt=f"Line {i}: the", temperature=0, max_tokens=20 + i)
    return r.choices[0].text


one_at_a_time = [request(i) for i in range(32)]
errors = []


def guarded(i):
    try:
        return request(i)
    except Exception as e:  # noqa: BLE001
        errors.append(repr(e))
        return None


with ThreadPoolExecutor(32) as pool:
    together = list(pool.map(guarded, range(32)))
check(f"32 concurrent clients: all answered, none errors ({len(errors)} errors)", not errors, errors[:3])
same = sum(a == b for a, b in zip(one_at_a_time, together))
check(f"... their greedy texts equal the same requests one at a time ({same} of 32)", same == 32,
      [(a, b) for a, b in zip(one_at_a_time, together) if a != b][:2])

gen = subprocess.run([BIN, "generate", "--checkpoint", CKPT, "--prompt", "Line 4: the", "--temperature", "0",
                      "--max-new-tokens", "24", "--device", "cpu", "--threads", "1"], capture_output=True, text=True)
gen_text = gen.stdout.split("\n", 3)[3] if gen.stdout.startswith("device:") else gen.stdout
check("greedy completion equals generate's text", gen.returncode == 0 and gen_text == "Line 4: the" + one_at_a_time[4] + "\n",
      (gen_text, one_at_a_time[4], gen.stderr[-300:]))
chat_run = subprocess.run([BIN, "chat", "--checkpoint", CKPT, "--temperature", "0", "--max-new-tokens", "21",
                           "--device", "cpu", "--threads", "1"], input="reverse word1\n", capture_output=True, text=True)
escaped = one_at_a_time[1].replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
check("greedy chat reply equals chat's", chat_run.returncode == 0 and chat_run.stdout == escaped + "\n",
      (chat_run.stdout, escaped, chat_run.stderr[-300:]))

# --- a client that never reads, and one that vanishes, block nobody -------------------------------------------
def health():
    return raw(server, "GET", "/health")[1]


def open_stream(max_tokens):
    """A raw streamed request on its own socket, its reply left unread."""
    body = json.dumps({"model": MODEL, "prompt": PROMPT, "max_tokens": max_tokens, "stream": True,
                       "temperature": 0}).encode()
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() +
              b"\r\nContent-Type: application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    return s


sleeper = open_stream(900)  # never read while the others are answered
quick = [request(i) for i in range(4)]
check("a client that reads nothing does not hold up the others", quick == one_at_a_time[:4])
sleeper.close()
vanishing = open_stream(900)
vanishing.recv(200)  # the reply has begun
vanishing.close()
deadline, freed = time.monotonic() + 1.0, False
while time.monotonic() < deadline and not freed:
    freed = health().get("decoding", 1) == 0
    time.sleep(0.01)
check(f"a client that vanishes mid-stream frees its place at once ({health()})", freed)

# --- a full queue: 429 at once --------------------------------------------------------------------------------
small = Server("--max-batch", "1", "--max-queue", "0")
hold = socket.create_connection(("127.0.0.1", small.port))
body = json.dumps({"model": MODEL, "prompt": PROMPT, "max_tokens": 900, "stream": True}).encode()
hold.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() +
             b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
hold.recv(100)
start = time.monotonic()
raises("a full queue", openai.RateLimitError,
       lambda: small.client().completions.create(model=MODEL, prompt=PROMPT, max_tokens=5), 429)
check("... answered at once", time.monotonic() - start < 2.0)

# --- SIGTERM: what is in flight is answered, exit 0 -------------------------------------------------------------
stream = small.client()
hold.close()
time.sleep(0.2)
got = []


def read_stream():
    try:
        for c in stream.completions.create(model=MODEL, prompt=PROMPT, max_tokens=200, stream=True):
            got.extend(c.choices)
    except Exception as e:  # noqa: BLE001
        got.append(repr(e))


reader = threading.Thread(target=read_stream)
reader.start()
time.sleep(0.3)
started = time.monotonic()
rc = small.stop()
reader.join(timeout=30)
check(f"SIGTERM: exit 0 ({rc}) within the grace ({time.monotonic() - started:.1f} s)",
      rc == 0 and time.monotonic() - started < 15)
check("... the stream in flight was answered to its end",
      bool(got) and not isinstance(got[-1], str) and got[-1].finish_reason in ("stop", "length"), got[-3:])
rc = server.stop()
check(f"SIGTERM on an idle server: exit 0 ({rc})", rc == 0)
print(f"{'FAILED' if failures else 'passed'}: {failures} failure(s)")
sys.exit(1 if failures else 0)
