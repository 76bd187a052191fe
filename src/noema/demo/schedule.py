"""The reminder chapter of `noema demo`: an alarm set in Spanish words, fired.

The person asks, in Spanish, for a reminder in a moment and another for
tomorrow morning. A scripted model sets both with `schedule_alarm`; the
tool echoes each as an absolute time in the agent's zone (Europe/Madrid
here). The model lists the schedules and cancels tomorrow's. A second
later the scheduler sensor fires the first alarm: it reaches the model as
an event through the hub, the archive and the queue, like anything else
the agent perceives, and the model reminds the person. Everything but the
model is the real agent, built by `build_app`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ..app import App
from ..memory.turns import TurnKind
from ..providers.scripted import ScriptedProvider, call, say

ZONE = "Europe/Madrid"
FIRED_WITHIN_S = 30.0  # far above the one second the alarm waits


async def schedule_chapter(open_app: Callable[[ScriptedProvider], App],
                           say_line: Callable[[str], None],
                           person: Callable[[str], None], pace: float) -> None:
    """Play the chapter; `open_app` builds the agent (zone Europe/Madrid) over a provider."""
    provider = ScriptedProvider(
        [
            say("Lo apunto.",
                call("schedule_alarm", reason="Sacar la ropa de la lavadora", when="en 1 segundo"),
                call("schedule_alarm", reason="Llamar a mamá", when="mañana a las 9")),
            say("Listo: el primero sonará en un segundo y el segundo mañana a las 9."),
            say("", call("schedule_list")),
            say("", call("schedule_cancel", id=2)),
            say("Cancelado el de mañana; queda el de la lavadora."),
            say("¡Ya es la hora! Saca la ropa de la lavadora."),
        ],
        token_delay_s=pace,
    )
    app = open_app(provider)
    try:
        await app.start()
        for text in ("Recuérdame en un segundo que saque la ropa de la lavadora, y mañana a "
                     "las 9 que llame a mamá.",
                     "Enséñame los recordatorios y quita el de mañana."):
            person(text)
            app.agent.submit(text)
            await app.agent.idle()
        delivered = await asyncio.wait_for(_fired(app), FIRED_WITHIN_S)
        await app.agent.idle()
        for line in delivered.splitlines():
            if "Alarm #" in line:
                say_line(f"the model read: …{line[line.index('Alarm #'):]}")
        say_line("The alarm came due while the agent was idle: the scheduler sensor emitted "
                 "it, the hub and the archive took it, and the model was woken with it as a "
                 "pool_event. The one cancelled never fires.")
    finally:
        await app.aclose()


async def _fired(app: App) -> str:
    """Wait until the model has been told of a firing; what it read (spaces unmarked)."""
    while True:
        for turn in app.session.turns:
            text = turn.content.replace("ˆ", " ")  # outside text marks its spaces
            if turn.kind is TurnKind.EVENT and "lavadora" in text:
                return text
        await asyncio.sleep(0.05)
