"""A scaffold of your own: a program that speaks the OpenAI API and runs commands through harness_shell."""

import json
import os
import re
import urllib.request

import harness_shell

BLOCK = re.compile(r"```bash\n(.*?)\n```", re.S)


def chat(messages: list[dict]) -> str:
    body = json.dumps({"model": os.environ["HARNESS_MODEL"], "messages": messages}).encode()
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        data=body,
        headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.loads(response.read())["choices"][0]["message"]["content"] or ""


task = harness_shell.task()
messages = [
    {"role": "system", "content": "Reply with one ```bash block per turn. Run `submit` when done."},
    {"role": "user", "content": f"{task['statement']}\n\nThe repository is at {task['workdir']}."},
]
for _ in range(task["max_turns"]):
    reply = chat(messages)
    messages.append({"role": "assistant", "content": reply})
    commands = BLOCK.findall(reply)
    if commands and commands[0].strip() == "submit":
        harness_shell.submit()
        break
    result = harness_shell.run(commands[0]) if commands else {"exit_code": "-", "output": "Write one ```bash block."}
    messages.append({"role": "user", "content": f"exit code {result['exit_code']}\n{result['output']}"})
