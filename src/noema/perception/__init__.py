"""Perception: sensors, the treatments that condense what they report, the
sensory archive, the gate the model controls, and delivery by pool_event."""

from .archive import ArchivePage, BatchInfo, SensoryArchive, UnknownBatch
from .clock import Clock, ManualClock, wall_clock
from .events import Event, Nature, Payload, SensorInfo, TreatmentParams, Urgency
from .gate import CannotSilence, Gate, GateState
from .hub import Backoff, Emitter, Sensor, SensorCrash, SensorHub
from .items import Aggregate, Discrete, GapSpan, Item, StateValue, Utterance
from .packing import pack, render_pool_event, sandwich, tally
from .pipeline import ChannelStatus, Pipeline
from .settings import PerceptionSettings
from .tools import perception_tools
from .treatments import Treatments, UnknownChannel, bucket_of
from .untrusted import SessionDelimiter, strip_invisible

__all__ = [
    "Aggregate", "ArchivePage", "Backoff", "BatchInfo", "CannotSilence", "ChannelStatus",
    "Clock", "Discrete", "Emitter", "Event", "GapSpan", "Gate", "GateState", "Item",
    "ManualClock", "Nature", "Payload", "PerceptionSettings", "Pipeline", "Sensor",
    "SensorCrash", "SensorHub", "SensorInfo", "SensoryArchive", "SessionDelimiter",
    "StateValue", "TreatmentParams", "Treatments", "UnknownBatch", "UnknownChannel",
    "Urgency", "Utterance", "bucket_of", "pack", "perception_tools", "render_pool_event",
    "sandwich", "strip_invisible", "tally", "wall_clock",
]
