"""A positional encoding states once the training protocol its theories assume, and the command
line accepts any registered encoding (issue 48: ``rasp_model.pe_names``'s ``theory_offsets``,
read by the replication, the curve and the report presets; ``rasp_cli.common.parse_pes``).

The independent truth: Zhou et al. 2023 and Huang et al. 2025 (§3) train a learned absolute
embedding with random position offsets, so that every position's row is trained, and NoPE without
them; a NoPE-like encoding that states no protocol is trained as given.
"""

import pytest

from analysis.experiment import replication as R
from analysis.reporting.presets import REPORT_PRESETS, theory_presets
from analysis.training.configs import TRAIN_PRESETS
from rasp_cli.common import UsageError, parse_pe_presets, parse_pes
from rasp_model.pe_names import (PE_NAMES, PositionalEncoding, PositionalEncodingError,
                                 register_pe, theory_protocol, unregister_pe)


class OffsetTrained(PositionalEncoding):
    """A toy encoding (nothing positional) whose theories would assume random offsets."""

    name, label, source = "toy_offset_pe", "toy", "this test"
    theory_offsets = "random"


@pytest.fixture
def toy():
    register_pe(OffsetTrained)
    yield OffsetTrained.name
    unregister_pe(OffsetTrained.name)


def test_the_builtins_protocols_are_the_papers():
    assert theory_protocol("ape_learned") == "random"
    assert {pe: theory_protocol(pe) for pe in PE_NAMES if pe != "ape_learned"} == \
        {pe: "none" for pe in PE_NAMES if pe != "ape_learned"}
    with pytest.raises(PositionalEncodingError, match="unknown positional encoding 'nosuch'"):
        theory_protocol("nosuch")


def test_presets_follow_the_encoding():
    """The demo preset's twin with random offsets is demo_random_offsets (configs: the demo
    preset plus position_offsets=random); quick has no such twin."""
    assert TRAIN_PRESETS["demo_random_offsets"]["position_offsets"] == "random"
    assert theory_presets("demo") == {"ape_learned": "demo_random_offsets"}
    assert theory_presets("quick") == {} and theory_presets("nosuch") == {}
    assert REPORT_PRESETS["main"]["pe_train_presets"] == {"ape_learned": "demo_random_offsets"}


def test_a_registered_encoding_states_its_protocol_once(toy):
    assert theory_protocol(toy) == "random"
    assert theory_presets("demo") == {"ape_learned": "demo_random_offsets",
                                      toy: "demo_random_offsets"}


def test_huang_cells_train_with_the_encodings_protocol():
    scale, cfg = R.FULL, R.FULL.configs[0]
    task = next(iter(R.replication_tasks()))
    offsets = {pe: R.run_overrides(task, pe, cfg, scale, False)["position_offsets"]
               for pe in R.HUANG_PES}
    assert offsets == {"nope": "none", "ape_learned": "random"}


def test_the_command_line_accepts_a_registered_encoding(toy):
    assert parse_pes(f"nope,{toy}") == ["nope", toy]
    assert parse_pe_presets([f"{toy}=demo_random_offsets"]) == {toy: "demo_random_offsets"}
    assert parse_pes("all") == list(PE_NAMES)               # `all`: the six built-ins


def test_an_unregistered_encoding_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown positional encoding 'toy_offset_pe'"):
        parse_pes("nope,toy_offset_pe")
    with pytest.raises(UsageError, match="--pe-preset"):
        parse_pe_presets(["toy_offset_pe=demo"])
