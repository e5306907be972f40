"""The dataclasses that write their own __init__ (init=False, so that mypyc compiles it:
docs/compiled.md) must still build what @dataclass would: every field set, and each
parameter's default the field's default."""
import dataclasses
import inspect

import pytest

from broker_core import delayed, effects, inputs, messages, storage
from sim import producer

WRITTEN = [effects.Send, effects.WriteBytes, effects.SetTimer, effects.CancelTimer, effects.Trace,
           inputs.MessageReceived, inputs.TimerFired, messages.ProduceRequest, messages.ProducePartitionResult,
           messages.ProduceResponse, messages.FetchPartition, messages.FetchRequest, messages.FetchPartitionResult,
           messages.FetchResponse, storage.FileRegion, delayed.DelayedProduce, delayed.DelayedFetch,
           producer.PendingBatch]


def _default(field: dataclasses.Field):
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


@pytest.mark.parametrize("cls", WRITTEN, ids=lambda c: c.__name__)
def test_written_init_sets_every_field_as_dataclass_would(cls):
    fields = {f.name: f for f in dataclasses.fields(cls)}
    parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
    assert [p.name for p in parameters] == list(fields)[:len(parameters)], "parameters in field order"
    required = {p.name: ("value", p.name) for p in parameters if p.default is inspect.Parameter.empty}
    built = cls(**required)
    for name, field in fields.items():
        expected = required[name] if name in required else _default(field)
        assert getattr(built, name) == expected, name
    given = {p.name: ("given", p.name) for p in parameters}
    built = cls(**given)
    for name in given:
        assert getattr(built, name) == ("given", name)


def test_the_generated_init_is_not_used():
    for cls in WRITTEN:
        assert "__create_fn__" not in cls.__init__.__qualname__, cls.__name__
