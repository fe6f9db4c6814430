"""`mygpt-ddp serve`'s chat page in a real browser: Debian's chromium driven headless by Selenium opens
the page, sends a message, sees the reply stream in (the reply's text observed growing in the page), sends
a second turn, and finds the conversation kept (both turns shown, and the second request carries the first
turn and its reply); the stop button ends a reply; an error object from the server, and a stream cut mid-reply
(the server stopped), show in the reply's bubble and the conversation goes on. A screenshot of the page is left in WORK_DIR/chat_page.png.

usage: serve_page_test.py MYGPT_DDP CHECKPOINT WORK_DIR
Exit 0 when all pass, 1 on a failure, 77 when no browser can be started (the caller skips)."""
import os
import shutil
import signal
import subprocess
import sys
import time

BIN, CKPT, WORK = sys.argv[1:4]
try:
    from selenium import webdriver
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:
    print("SKIP: the page in a browser (no selenium: pip install selenium)")
    sys.exit(77)

failures = 0


def check(name, ok, detail=""):
    global failures
    print(("PASS: " if ok else "FAIL: ") + name + ("" if ok or not detail else " -- " + str(detail)[:400]), flush=True)
    failures += 0 if ok else 1


options = webdriver.ChromeOptions()
for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1100,800"):
    options.add_argument(arg)
chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
if chromium:
    options.binary_location = chromium
driver_path = shutil.which("chromedriver")
try:
    service = webdriver.ChromeService(executable_path=driver_path) if driver_path else webdriver.ChromeService()
    browser = webdriver.Chrome(options=options, service=service)
except Exception as e:  # noqa: BLE001 - no browser here: skipped, said in one line
    print(f"SKIP: the page in a browser (chromium could not start: {str(e).splitlines()[0][:150]})")
    sys.exit(77)

log = open(os.path.join(WORK, "page_server.err"), "w")


def start_server(port):
    """The server on PORT (0: any free one); SIGTERM cuts the replies in flight at once (--shutdown-grace 0)."""
    return subprocess.Popen([BIN, "serve", "--checkpoint", CKPT, "--port", str(port), "--device", "cpu", "--threads", "1",
                             "--shutdown-grace", "0"], stdout=subprocess.PIPE, stderr=log, text=True)


server = start_server(0)
try:
    url = server.stdout.readline().split()[2]
    browser.get(url + "/")
    check("the page loads: " + browser.title, browser.title == "mygpt-ddp chat")
    WebDriverWait(browser, 20).until(lambda b: b.find_element(By.ID, "model").text not in ("", "…"))
    check("it names the model: " + browser.find_element(By.ID, "model").text,
          not browser.find_element(By.ID, "model").text.startswith("("))
    # What the page sends, and every state of the reply's text as the page shows it.
    browser.execute_script("""
      window.sent = [];
      const fetch0 = window.fetch;
      window.fetch = (url, init) => { if (init && init.body) window.sent.push(JSON.parse(init.body)); return fetch0(url, init); };
      window.states = [];
      new MutationObserver(() => {
        const replies = document.querySelectorAll('.msg.assistant');
        if (replies.length) window.states.push(replies[replies.length - 1].textContent);
      }).observe(document.getElementById('log'), {subtree: true, childList: true, characterData: true});
    """)
    browser.find_element(By.ID, "max_tokens").clear()
    browser.find_element(By.ID, "max_tokens").send_keys("60")

    def turn(text):
        browser.find_element(By.ID, "input").send_keys(text)
        browser.find_element(By.ID, "send").click()
        WebDriverWait(browser, 60).until(lambda b: not b.find_elements(By.CSS_SELECTOR, ".msg.assistant.streaming"))
        return browser.find_elements(By.CSS_SELECTOR, ".msg.assistant")[-1].text

    first = turn("reverse abc")
    states = [s for s in browser.execute_script("return window.states") if s]
    growing = len(set(states))
    check(f"the first reply streams in: {growing} states of its text, each extending the last ({first[:40]!r})",
          growing >= 3 and all(b.startswith(a) for a, b in zip(states, states[1:])), states[:5])
    second = turn("and again")
    users = [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".msg.user")]
    replies = [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".msg.assistant")]
    check("a second turn: both turns and both replies shown", users == ["reverse abc", "and again"] and len(replies) == 2,
          (users, replies))
    sent = browser.execute_script("return window.sent")
    conversation = [(m["role"], m["content"]) for m in sent[-1]["messages"]] if sent else []
    check("the second request carries the conversation (turn, reply, turn)",
          conversation == [("user", "reverse abc"), ("assistant", first), ("user", "and again")], conversation)
    check("each request streams", all(s.get("stream") is True for s in sent), sent)
    # The stop button ends a reply in progress.
    browser.find_element(By.ID, "max_tokens").clear()
    browser.find_element(By.ID, "max_tokens").send_keys("500")  # within the context left after two turns
    browser.find_element(By.ID, "input").send_keys("tell me more")
    browser.find_element(By.ID, "send").click()
    stop = browser.find_element(By.ID, "stop")
    clicked = stop.is_enabled()  # a reply that ended by itself already (<|assistant_end|>) has nothing to stop
    if clicked:
        stop.click()
    WebDriverWait(browser, 20).until(lambda b: not b.find_element(By.ID, "stop").is_enabled())
    notes = [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".note, .error")]
    check(f"the stop button ends a reply in progress: {notes}" if clicked else "the reply ended before stop was pressed",
          not clicked or "(stopped)" in notes or "(cut at max tokens)" in notes, notes)
    check("the page is ready for the next message", browser.find_element(By.ID, "send").is_enabled())

    def set_max_tokens(n):
        browser.find_element(By.ID, "max_tokens").clear()
        browser.find_element(By.ID, "max_tokens").send_keys(str(n))

    def bubbles():
        return browser.execute_script(
            "return [...document.querySelectorAll('.msg.assistant')].map(e => [e.textContent, e.className])")

    def alternates(messages):
        roles = [m["role"] for m in messages]
        return roles == ["user", "assistant"] * (len(roles) // 2) + ["user"]

    # An error object from the server (max_tokens above its limit): it shows in the reply's own bubble, no
    # bubble is left empty, and the next turn is answered without the turn that got no reply.
    set_max_tokens(100000)
    browser.find_element(By.ID, "input").send_keys("this one fails")
    browser.find_element(By.ID, "send").click()
    WebDriverWait(browser, 30).until(lambda b: b.find_element(By.ID, "send").is_enabled())
    text, kind = bubbles()[-1]
    check(f"an error object shows in the reply's bubble: {text!r}", "failed" in kind and "max_tokens is 100000" in text)
    check("no assistant bubble is left empty", all(t.strip() for t, _ in bubbles()), bubbles())
    set_max_tokens(20)
    after = turn("after the error")
    messages = browser.execute_script("return window.sent")[-1]["messages"]
    check(f"the next turn is answered ({after[:30]!r}), its request without the turn that got no reply",
          after.strip() != "" and "this one fails" not in [m["content"] for m in messages] and alternates(messages)
          and messages[-1] == {"role": "user", "content": "after the error"}, messages)

    # A stream that breaks mid-reply (SIGTERM cuts the replies in flight: an error event): the bubble keeps
    # what was shown, the error under it; a server started again on the same port answers the next turn,
    # whose request carries the cut reply.
    browser.find_element(By.ID, "clear").click()
    set_max_tokens(900)
    browser.find_element(By.ID, "input").send_keys("a long one")
    browser.find_element(By.ID, "send").click()
    WebDriverWait(browser, 30, poll_frequency=0.05).until(lambda b: len(bubbles()) == 1 and bubbles()[0][0].strip())
    server.send_signal(signal.SIGTERM)
    rc = server.wait(timeout=30)
    check(f"the server exits 0 on SIGTERM mid-reply ({rc})", rc == 0)
    WebDriverWait(browser, 30).until(lambda b: b.find_element(By.ID, "send").is_enabled())
    text, kind = bubbles()[-1]
    shown = text.split("\nerror: ")[0]
    check(f"a cut reply keeps its text, the error under it: {text[-90:]!r}",
          "failed" in kind and shown.strip() != "" and text.endswith("error: the server is shutting down: the reply was cut"),
          text)
    server = start_server(url.rsplit(":", 1)[1])
    server.stdout.readline()
    set_max_tokens(20)
    back = turn("are you back")
    messages = browser.execute_script("return window.sent")[-1]["messages"]
    check(f"after the break the next turn is answered ({back[:30]!r}), its request carrying the cut reply",
          back.strip() != "" and messages == [{"role": "user", "content": "a long one"},
                                              {"role": "assistant", "content": shown},
                                              {"role": "user", "content": "are you back"}], messages)
    browser.save_screenshot(os.path.join(WORK, "chat_page.png"))
finally:
    browser.quit()
    server.send_signal(signal.SIGTERM)
    rc = server.wait(timeout=30)
check(f"the server exits 0 on SIGTERM ({rc})", rc == 0)
sys.exit(1 if failures else 0)
