"""llama.cpp's Python server for Gemma 3, with a chat format of our own.

The Gemma 3 270M file the tests use carries no chat template, and the
server's own `gemma` format drops the system message, which holds all of
Noema's instructions (and the chronicler's protocol). This format writes
Gemma's turns as its model card describes them: `<start_of_turn>user` or
`<start_of_turn>model`, each closed by `<end_of_turn>`; the system text opens
the first user turn, since Gemma has no system role; a tool's result is a
user turn that says so, a call the model made is told in its turn; turns of
one role in a row are one turn. Then the server runs as `python -m
llama_cpp.server` would, with the arguments given (`scripts/llama_server
serve --family gemma3` passes `--chat_format noema-gemma3`).
"""

from __future__ import annotations

from typing import Any

from llama_cpp import llama_chat_format as chat
from llama_cpp.server.__main__ import main

OPEN, CLOSE = "<start_of_turn>", "<end_of_turn>"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # parts: only the text ones are read
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


@chat.register_chat_format("noema-gemma3")
def gemma3(messages: list[dict[str, Any]], **kwargs: Any) -> chat.ChatFormatterResponse:
    system = "\n\n".join(_text(m.get("content")) for m in messages if m["role"] == "system")
    turns: list[list[str]] = []  # [role, text]
    for message in messages:
        role = message["role"]
        if role == "system":
            continue
        text = _text(message.get("content"))
        if role == "tool":
            text = f"[the result of a tool call]\n{text}"
        calls = message.get("tool_calls") or []
        if calls:
            text += "".join(f"\n[calls {c['function']['name']}({c['function']['arguments']})]"
                            for c in calls)
        speaker = "model" if role == "assistant" else "user"
        if speaker == "user" and system:
            text, system = f"{system}\n\n{text}", ""
        if turns and turns[-1][0] == speaker:
            turns[-1][1] += "\n\n" + text
        else:
            turns.append([speaker, text])
    if system:  # a conversation of the system text alone
        turns.insert(0, ["user", system])
    prompt = "".join(f"{OPEN}{speaker}\n{text}{CLOSE}\n" for speaker, text in turns)
    return chat.ChatFormatterResponse(prompt=prompt + f"{OPEN}model\n", stop=CLOSE)


if __name__ == "__main__":
    main()  # the format above is registered: the server can be asked for it
