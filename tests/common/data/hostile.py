"""A task that tries to drive the operator's terminal: it writes the clipboard (OSC 52),
sets the window title (OSC 2), clears the screen (CSI 2J, also as the one-character C1 CSI),
reverses text (U+202E), in plain lines, in an event's fields and in its last lines, then
fails so that the summary quotes it. Every line carries a marker the test looks for."""

import json
import sys
import time

OSC52 = "\x1b]52;c;UFdORUQtQ0xJUA==\x1b\\"     # "PWNED-CLIP"
TITLE = "\x1b]2;PWNED-TITLE\x07"
lines = [
    f"MARK-A {OSC52}text-a",
    f"MARK-B {TITLE}text-b",
    "MARK-C \x1b[2J\x1b[Htext-c",
    "MARK-D \x9b2J\u009d52;c;UFdORUQ=\x9ctext-d",
    "MARK-E \u202edesrever\u202c \u2066iso\u2069 text-e",
    "MARK-F [/] [bold]not markup[/bold] text-f",
]
for line in lines:
    print(line, flush=True)
print(json.dumps({"event": "error", "v": 1, "role": sys.argv[1], "index": 0, "t": time.time(),
                  "type": f"Boom{OSC52}", "message": f"MARK-G {TITLE}{OSC52}text-g [/]"}), flush=True)
if sys.argv[1] == "worker":
    time.sleep(0.3)
    print(f"MARK-H last {OSC52}{TITLE}text-h", flush=True)
    sys.exit(3)
