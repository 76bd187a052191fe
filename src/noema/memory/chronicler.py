"""The chronicler: a separate model call that retells a block of turns as a save point.

It reads the previous save point and the block (each turn with its ID) and
writes a new save point with two sections, a short State and the Journey, in
the configured language. When the validator rejects an attempt, the next
request carries the rejected text and the failures, named one by one.

The protocol below is ours, written from the project's specification.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from ..providers.base import (
    BadRequest,
    Message,
    MessageRole,
    ModelRequest,
    Provider,
    ResponseBuilder,
    SchemaStyle,
)
from ..providers.traffic import Metered, Speed
from .structured import looks_structured, save_point_schema
from .structured import render as render_structured
from .render import compact_ranges, render_block
from .tokens import MESSAGE_OVERHEAD, estimate_tokens
from .turns import Turn, TurnKind
from .validator import Citable, Failure

log = logging.getLogger(__name__)

HEADINGS = {"en": ("State", "The Journey"), "es": ("Estado", "El Viaje")}

# Endpoints (server, model) found to give structured save points (True) or not
# (False), for the life of the process; unknown ones are tried.
_STRUCTURED: dict[tuple[str, str], bool] = {}

_PROTOCOL = {
    "en": """\
You are the chronicler of a long conversation between a person and {agent}, an AI agent.
The conversation grows too long to stay whole in {agent}'s working memory, so its oldest
part is handed to you from time to time. What you write becomes {agent}'s memory of that
part: from now on it will read your chronicle instead of those turns, and whenever it needs
the exact words it can fetch any original turn by the ID you cite.

You receive the previous save point (none the first time), which already tells the story up
to this point, and a block of turns, oldest first, each introduced by its ID in square
brackets. You write a new save point that replaces the previous one, so it must stand on
its own: carry the earlier story forward (older parts may be told more briefly) and continue
it with the new turns, as one story.

Write exactly these two sections and nothing before or after them:

## {state}
A few lines on where things stand now: what the person wants, what was decided, what is
still open or promised, the facts that will matter next (names, numbers, paths, dates).

## {journey}
The chronicle, in paragraphs of prose.

How to write the Journey:
1. Tell the story; do not summarise it. Keep the intentions (why something was asked or
   done), the doubts, the false starts and the corrections, the order in which one thing led
   to another, and the tone between the person and the agent. A list of points is a failure.
   A terse Journey is a failure. A detailed chronicle that someone arriving now could follow
   is what is wanted.
2. Cite inline, where the idea appears: put {{cite:ID}} right after the words that come from
   that turn, inside the sentence, before its full stop. Right: "The turning point came when
   the person explained that the system learned from text {{cite:6}}, a detail that changed
   the direction of the conversation." Wrong: "... a detail that changed the direction of the
   conversation. {{cite:6}}". Never gather citations at the end of a paragraph and never put
   them on a line of their own. Several IDs may share a marker when one phrase rests on
   them all: {{cite:12, 14}}.
3. Turns marked FLASHBACK are memories, not new events: there the agent re-read its own past
   with lookup_turn or search_full_history. Narrate the act of remembering, for example "to
   answer precisely, the agent went back to its records and found the original discussion of
   the migration {{cite:40}}", and never tell the recalled content as if it happened again.
4. Cite only the IDs you were given: the turns of the block, the turns the previous save point
   cites, and the older turns a flashback brought back. They are listed at the end of the
   input. Never invent, alter, round or guess an ID; if you are not sure which turn said
   something, cite the one you are sure of, or none.
5. Tool calls and their results can be told briefly ("it read the file and found that..."),
   cited when their content matters.
6. Write in English.""",
    "es": """\
Eres el cronista de una conversación larga entre una persona y {agent}, un agente de IA.
La conversación crece demasiado para caber entera en la memoria de trabajo de {agent}, así
que de vez en cuando se te entrega su parte más antigua. Lo que escribas será la memoria que
{agent} tenga de esa parte: desde ahora leerá tu crónica en lugar de esos turnos y, cuando
necesite las palabras exactas, podrá recuperar cualquier turno original por el ID que cites.

Recibes el punto de guardado anterior (ninguno la primera vez), que ya cuenta la historia
hasta aquí, y un bloque de turnos, del más antiguo al más reciente, cada uno precedido de su
ID entre corchetes. Escribes un punto de guardado nuevo que sustituye al anterior, así que
debe sostenerse solo: lleva adelante la historia previa (lo más antiguo puede contarse más
brevemente) y continúala con los turnos nuevos, como una sola historia.

Escribe exactamente estas dos secciones, sin nada antes ni después:

## {state}
Unas pocas líneas sobre cómo están las cosas ahora: qué quiere la persona, qué se decidió,
qué queda pendiente o prometido, los datos que importarán después (nombres, cifras, rutas,
fechas).

## {journey}
La crónica, en párrafos de prosa.

Cómo escribir el Viaje:
1. Cuenta la historia; no la resumas. Conserva las intenciones (por qué se pidió o se hizo
   algo), las dudas, los tropiezos y las correcciones, el orden en que una cosa llevó a otra y
   el tono entre la persona y el agente. Una lista de puntos es un fracaso. Un Viaje escueto es
   un fracaso. Lo que se busca es una crónica detallada que alguien que llegue ahora pueda
   seguir.
2. Cita en línea, donde aparece la idea: pon {{cite:ID}} justo después de las palabras que
   vienen de ese turno, dentro de la frase y antes de su punto. Bien: "El giro llegó cuando la
   persona aclaró que su sistema aprendía del texto {{cite:6}}, un detalle que cambió el rumbo
   de la conversación." Mal: "... un detalle que cambió el rumbo de la conversación.
   {{cite:6}}". No acumules citas al final de un párrafo ni las pongas en una línea aparte.
   Varios IDs pueden compartir marca cuando una frase se apoya en todos: {{cite:12, 14}}.
3. Los turnos marcados FLASHBACK son recuerdos, no sucesos nuevos: ahí el agente releyó su
   propio pasado con lookup_turn o search_full_history. Narra el acto de recordar, por
   ejemplo "para responder con precisión, el agente volvió a sus registros y encontró la
   conversación original sobre la migración {{cite:40}}", y nunca cuentes lo recordado como si
   volviera a ocurrir.
4. Cita solo los IDs que se te dieron: los turnos del bloque, los que cita el punto de
   guardado anterior y los turnos antiguos que trajo un flashback. Aparecen al final de la
   entrada. Nunca inventes, alteres, redondees ni adivines un ID; si no sabes con certeza qué
   turno dijo algo, cita el que sí sepas, o ninguno.
5. Las llamadas a herramientas y sus resultados pueden contarse brevemente ("leyó el fichero y
   vio que..."), citándolas cuando su contenido importe.
6. Escribe en español.""",
}

_INPUT = {
    "en": (
        "# Previous save point\n{previous}\n\n"
        "# Turns to chronicle: {count} turns, IDs {first} to {last}\n\n{turns}\n\n"
        "# Citable IDs\n{citable}\n\n"
        "Write the new save point now.{length}"
    ),
    "es": (
        "# Punto de guardado anterior\n{previous}\n\n"
        "# Turnos que narrar: {count} turnos, IDs {first} a {last}\n\n{turns}\n\n"
        "# IDs citables\n{citable}\n\n"
        "Escribe ahora el nuevo punto de guardado.{length}"
    ),
}

_NO_PREVIOUS = {
    "en": "(none: this is the first save point of the conversation)",
    "es": "(ninguno: es el primer punto de guardado de la conversación)",
}

_LENGTH = {
    "en": " For these turns a Journey of at least {words} words is expected.",
    "es": " Para estos turnos se espera un Viaje de al menos {words} palabras.",
}

_BOUND = {
    "en": " Keep the whole save point under {words} words: it must fit a small window, so "
          "tell the older parts more briefly.",
    "es": " Mantén el punto de guardado entero por debajo de {words} palabras: debe caber en "
          "una ventana pequeña, así que cuenta lo más antiguo más brevemente.",
}

_ADVICE = {
    "en": "\n\nAn earlier attempt over more turns was rejected for these reasons; avoid them:\n",
    "es": "\n\nUn intento anterior sobre más turnos fue rechazado por estos motivos; evítalos:\n",
}

_STRUCTURED_FORM = {
    "en": (
        "\n\nGive the save point as one JSON object: \"state\" holds the text of the "
        "State; \"journey\" holds the Journey as the list of its sentences, in order, "
        "each an object with \"sentence\" (its words, with no citation marker) and "
        "\"cite\" (the ID of the one turn it comes from, from the citable IDs)."
    ),
    "es": (
        "\n\nDa el punto de guardado como un objeto JSON: \"state\" lleva el texto del "
        "Estado; \"journey\" lleva el Viaje como la lista de sus frases, en orden, cada "
        "una un objeto con \"sentence\" (sus palabras, sin marca de cita) y \"cite\" "
        "(el ID del turno del que viene, de entre los IDs citables)."
    ),
}

_RETRY = {
    "en": (
        "The validator rejected that save point:\n{failures}\n\n"
        "Write the whole save point again, with both sections, fixing these points and keeping "
        "everything that was right."
    ),
    "es": (
        "El validador rechazó ese punto de guardado:\n{failures}\n\n"
        "Escribe de nuevo el punto de guardado completo, con las dos secciones, corrigiendo "
        "estos puntos y conservando todo lo que estaba bien."
    ),
}


@dataclass(frozen=True, slots=True)
class ChronicleRequest:
    """Everything one save point is written from."""

    previous_text: str | None
    block: tuple[Turn, ...]
    citable: Citable
    language: str = "en"
    agent_name: str = "the agent"
    result_chars: int = 1500
    min_journey_words: int = 40
    zone: ZoneInfo | None = None
    max_words: int | None = None  # the whole save point, when a small window bounds it
    advice: tuple[str, ...] = ()  # what earlier attempts over a larger block got wrong


@dataclass(frozen=True, slots=True)
class Rejection:
    """A rejected attempt, to be shown back to the chronicler."""

    text: str
    failures: tuple[Failure, ...]


def _tongue(language: str) -> str:
    return language if language in _PROTOCOL else "en"


def expected_words(request: ChronicleRequest) -> int:
    """A floor for the Journey's length that grows with what the block says."""
    said = sum(
        len(t.content.split()) for t in request.block if t.kind in (TurnKind.USER, TurnKind.ASSISTANT)
    )
    floor = max(request.min_journey_words, min(600, said // 5))
    if request.max_words is not None:  # a floor above the bound could not be met
        floor = min(floor, max(request.max_words * 2 // 3, request.min_journey_words))
    return floor


def build_messages(request: ChronicleRequest, rejections: Sequence[Rejection] = (),
                   *, structured: bool = False) -> tuple[Message, ...]:
    """The chronicler's conversation: protocol, input (asking for structured
    data when `structured`), and any rejected attempts."""
    lang = _tongue(request.language)
    state, journey = HEADINGS[lang]
    system = _PROTOCOL[lang].format(agent=request.agent_name, state=state, journey=journey)
    block = request.block
    user = _INPUT[lang].format(
        previous=(request.previous_text or "").strip() or _NO_PREVIOUS[lang],
        count=len(block),
        first=block[0].id,
        last=block[-1].id,
        turns=render_block(block, result_chars=request.result_chars, zone=request.zone),
        citable=compact_ranges(request.citable.all),
        length=_LENGTH[lang].format(words=expected_words(request)) + (
            _BOUND[lang].format(words=request.max_words) if request.max_words else "")
        + (_ADVICE[lang] + "\n".join(f"- {a}" for a in request.advice) if request.advice else "")
        + (_STRUCTURED_FORM[lang] if structured else ""),
    )
    messages = [Message(MessageRole.SYSTEM, system), Message(MessageRole.USER, user)]
    for rejection in rejections:
        listed = "\n".join(f"{n}. {f.message}" for n, f in enumerate(rejection.failures, 1))
        messages.append(Message(MessageRole.ASSISTANT, rejection.text or "(empty)"))
        messages.append(Message(MessageRole.USER, _RETRY[lang].format(failures=listed)))
    return tuple(messages)


# What the providers ask for when no output limit is configured.
DEFAULT_OUTPUT_TOKENS = 4096


def protocol_tokens(language: str = "en", agent_name: str = "the agent") -> int:
    """What the chronicler's request costs besides the previous save point, the
    block and the citable IDs: its instructions, headings and framing."""
    lang = _tongue(language)
    state, journey = HEADINGS[lang]
    system = _PROTOCOL[lang].format(agent=agent_name, state=state, journey=journey)
    frame = (_INPUT[lang] + _LENGTH[lang] + _BOUND[lang] + _NO_PREVIOUS[lang]
             + _STRUCTURED_FORM[lang] + _ADVICE[lang])
    return estimate_tokens(system) + estimate_tokens(frame) + 3 * MESSAGE_OVERHEAD


def answer_room(window: int, input_fraction: float) -> int:
    """Tokens of the chronicler's window kept for the save point it writes."""
    return max(int(window * (1 - input_fraction)), 1)


def _fitted(messages: list[Message], room: int) -> list[Message]:
    """The conversation without its oldest rejected attempts while it exceeds
    `room`: the newest rejection says what to fix, the older ones only cost."""
    def size(ms: list[Message]) -> int:
        return sum(estimate_tokens(m.content) + MESSAGE_OVERHEAD for m in ms)

    while len(messages) > 4 and size(messages) > room:
        del messages[2:4]
    return messages


class Chronicler:
    """Writes save points with its own model.

    The provider is metered (`providers.traffic.Metered`): its speed, learnt
    from what it did, sizes each attempt to the time it may take; given a
    traffic guard, its requests give way to the person's.
    """

    def __init__(
        self,
        provider: Provider,
        *,
        max_output_tokens: int | None = None,
        structured: bool | None = None,
    ) -> None:
        """`structured` forces free text (False) or structured data (True, where
        the server's kind can hold a schema); None: what works, per endpoint."""
        self.provider = provider if isinstance(provider, Metered) else Metered(provider)
        self.max_output_tokens = max_output_tokens
        self.force_structured = structured
        self.last_structured = False  # whether the last attempt was asked as structured data

    @property
    def structured(self) -> bool:
        """Whether the next attempt asks for structured data: the server's kind
        can hold an answer to a schema, and this endpoint has not shown that
        it cannot (what worked is remembered per endpoint)."""
        style = getattr(self.provider.inner, "schema_style", SchemaStyle.NONE)
        if style is SchemaStyle.NONE or self.force_structured is False:
            return False
        return self.force_structured or _STRUCTURED.get(self._endpoint, True)

    @property
    def _endpoint(self) -> tuple[str, str]:
        endpoint = getattr(self.provider.inner, "endpoint", None)
        where = getattr(endpoint, "base_url", None) or f"{self.provider.name}#{id(self.provider)}"
        return (str(where), self.provider.model)

    @property
    def speed(self) -> Speed:
        """What the chronicler's endpoint has been measured to do."""
        return self.provider.speed

    async def wait_turn(self) -> None:
        """Until a request that gave way to the person's may be asked again."""
        if self.provider.traffic is not None:
            await self.provider.traffic.wait_turn()

    @property
    def label(self) -> str:
        return f"{self.provider.name}/{self.provider.model}"

    @property
    def context_window(self) -> int:
        return self.provider.context_window

    async def write(self, request: ChronicleRequest, rejections: Sequence[Rejection] = (),
                    *, input_fraction: float = 0.5, max_tokens: int | None = None) -> str:
        """One attempt at the save point's text (provider errors propagate).

        The request and the answer it asks for fit the chronicler's window:
        older rejected attempts give way first, and `max_tokens` is what the
        window leaves, never more than the configured output limit nor than
        `max_tokens` (what the attempt's time allows)."""
        structured = self.structured
        self.last_structured = structured
        window = self.context_window
        room = window - answer_room(window, input_fraction)
        messages = _fitted(list(build_messages(request, rejections, structured=structured)), room)
        prompt = sum(estimate_tokens(m.content) + MESSAGE_OVERHEAD for m in messages)
        left = window - prompt - prompt // 20 - 16  # the estimate may fall a little short
        limit = self.max_output_tokens or DEFAULT_OUTPUT_TOKENS
        if max_tokens:
            limit = min(limit, max_tokens)
        model_request = ModelRequest(
            messages=tuple(messages),
            max_tokens=max(min(limit, left), 1),
            answer_schema=save_point_schema(request.citable.all, max(min(limit, left), 1),
                                            min_words=expected_words(request))
            if structured else None,
        )
        try:
            raw = await self._answer(model_request)
        except BadRequest:
            if not structured:
                raise
            # The server refused the schema: free text from now on, at once.
            _STRUCTURED[self._endpoint] = False
            log.info("%s refused a request for structured output; the chronicler writes free "
                     "text there from now on", self.label)
            return await self.write(request, rejections, input_fraction=input_fraction,
                                    max_tokens=max_tokens)
        if not structured:
            return raw
        rendered = render_structured(raw, HEADINGS[_tongue(request.language)])
        if rendered is None and not looks_structured(raw):
            _STRUCTURED[self._endpoint] = False  # it ignores the schema: ask for text instead
            log.info("%s answered a request for structured output with prose; the chronicler "
                     "writes free text there from now on", self.label)
            return raw
        if rendered is not None:
            _STRUCTURED[self._endpoint] = True
        return rendered if rendered is not None else raw

    async def _answer(self, model_request: ModelRequest) -> str:
        builder = ResponseBuilder()
        async for event in self.provider.stream(model_request):
            builder.feed(event)
        response = builder.build()
        if not response.text.strip() and response.tool_calls:  # the answer as a tool's input
            return response.tool_calls[0].arguments
        return response.text
