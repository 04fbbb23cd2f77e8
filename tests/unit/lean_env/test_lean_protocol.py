"""Framing and typed parsing of the Lean REPL protocol, checked on the REPL's
own recorded answers."""

from __future__ import annotations

import json

import pytest

from lean_env.lean.protocol import (
    CommandResponse, Position, ProofStepResponse, ProtocolError, ReplError, RequestEncodingError,
    command_request, decode_response, encode_request, parse_command_response, parse_tactic_response,
    response_frame_end, tactic_request)
from tests.lean.lean_support import FIXTURES, needs_fixtures, requests, responses, transcript_names


# -- encoding -----------------------------------------------------------------

def test_request_is_one_line_then_one_blank_line():
    data = encode_request(command_request("theorem t : 1 = 1 := by\n  rfl", env=0))
    assert data.endswith(b"}\n\n")
    assert data.count(b"\n") == 2
    assert json.loads(data) == {"cmd": "theorem t : 1 = 1 := by\n  rfl", "env": 0}


def test_non_ascii_is_sent_as_raw_utf8():
    data = encode_request(command_request("∑ k ∈ s, k = 0 ∧ 𝓟 x"))
    assert "∑ k ∈ s, k = 0 ∧ 𝓟 x".encode("utf-8") in data
    assert b"\\u" not in data


def test_control_characters_are_escaped_not_sent_raw():
    data = encode_request(tactic_request("simp\r\n\x00\x1b", 3))
    assert b"\r" not in data and b"\x00" not in data and b"\x1b" not in data
    assert json.loads(data) == {"tactic": "simp\r\n\x00\x1b", "proofState": 3}


@pytest.mark.parametrize("text", ["\ud800", "ok \udfff tail", "\ud835 no low half"])
def test_lone_surrogates_are_refused(text):
    with pytest.raises(RequestEncodingError, match="not valid Unicode"):
        encode_request(command_request(text))


def test_non_objects_and_unserialisable_values_are_refused():
    with pytest.raises(RequestEncodingError):
        encode_request(["cmd"])  # type: ignore[arg-type]
    with pytest.raises(RequestEncodingError):
        encode_request({"cmd": object()})


# -- framing of answers ----------------------------------------------------------

def test_frame_end_waits_for_the_blank_line():
    assert response_frame_end(b'{"env":\n 0}') is None
    assert response_frame_end(b'{"env":\n 0}\n') is None
    assert response_frame_end(b'{"env":\n 0}\n\n') == len(b'{"env":\n 0}\n\n')


def test_frame_end_skips_leading_blank_lines_and_stops_at_the_first_answer():
    buffer = b'\n\n{"env": 0}\n\n{"env": 1}\n\n'
    end = response_frame_end(buffer)
    assert decode_response(buffer[:end]) == {"env": 0}
    assert decode_response(buffer[end:end + response_frame_end(buffer[end:])]) == {"env": 1}
    assert response_frame_end(b"\n\n\n") is None


@pytest.mark.parametrize("frame", [b"not json\n\n", b"[1, 2]\n\n", b"\xff\xfe{}\n\n", b'"env"\n\n'])
def test_garbled_answers_raise_protocol_error(frame):
    with pytest.raises(ProtocolError):
        decode_response(frame)


@needs_fixtures
@pytest.mark.parametrize("name", transcript_names())
def test_every_recorded_transcript_frames_into_one_answer_per_request(name):
    """Split each recorded output stream exactly as the client does and type
    every answer with the parser its request calls for."""
    stream = (FIXTURES / f"{name}.expected.out").read_bytes()
    answers = []
    while stream.strip():
        end = response_frame_end(stream)
        assert end is not None, f"{name}: unterminated answer"
        answers.append(decode_response(stream[:end]))
        stream = stream[end:]
    sent = requests(name)
    assert len(answers) == len(sent)
    for request, answer in zip(sent, answers):
        parse = parse_tactic_response if "tactic" in request or "unpickleProofStateFrom" in request \
            or ("pickleTo" in request and "proofState" in request) else parse_command_response
        typed = parse(answer)
        assert isinstance(typed, (CommandResponse, ProofStepResponse, ReplError))


# -- typed answers -----------------------------------------------------------------

@needs_fixtures
def test_line_breaks_answers():
    first, second, third = (parse_command_response(r) for r in responses("line_breaks"))
    assert first.env == 0
    assert [m.severity for m in first.messages] == ["error", "error"]
    assert first.errors[1].pos == Position(2, 0)
    assert "expected command" in first.errors[1].data
    assert second.sorries[0].proof_state == 0 and second.sorries[0].goal == "⊢ 1 = 1"
    assert not second.errors and [m.severity for m in second.messages] == ["warning"]
    assert third == CommandResponse(env=2)


@needs_fixtures
def test_tactic_answer_with_no_goals_is_not_completed():
    answer = parse_tactic_response(responses("invalid_tactic")[1])
    assert isinstance(answer, ProofStepResponse)
    assert answer.goals == () and answer.proof_status == "Incomplete: contains sorry"
    assert answer.errors and not answer.completed


@needs_fixtures
def test_completed_tactic_answer():
    answer = parse_tactic_response(responses("mathlib/exact")[2])
    assert answer.proof_status == "Completed" and answer.completed
    assert [m.severity for m in answer.messages] == ["info"]


@needs_fixtures
def test_sorry_without_position_from_tactic_mode():
    answer = parse_tactic_response(responses("have_by_sorry")[2])
    assert answer.sorries[0].pos is None and answer.sorries[0].proof_state == 2
    assert answer.goals == ("x : Int\nh : x = 1\n⊢ x = 1",)
    assert not answer.completed


@needs_fixtures
def test_repl_level_errors():
    assert parse_command_response(responses("unknown_environment")[0]) == ReplError("Unknown environment.")
    lean_error = parse_tactic_response(responses("unknown_tactic")[1])
    assert isinstance(lean_error, ReplError) and lean_error.message.startswith("Lean error:")


@pytest.mark.parametrize("answer", [
    {"env": "0"},
    {"env": True},
    {"messages": []},
    {"env": 0, "messages": [{"data": "no severity"}]},
    {"env": 0, "messages": "not a list"},
    {"env": 0, "sorries": [{"goal": 3}]},
    {"env": 0, "messages": [{"severity": "error", "data": "x", "pos": {"line": "1", "column": 0}}]},
])
def test_malformed_command_answers_raise_protocol_error(answer):
    with pytest.raises(ProtocolError):
        parse_command_response(answer)


@pytest.mark.parametrize("answer", [{"goals": []}, {"proofState": 1, "goals": [1]},
                                    {"proofState": 1, "proofStatus": 3}])
def test_malformed_tactic_answers_raise_protocol_error(answer):
    with pytest.raises(ProtocolError):
        parse_tactic_response(answer)
