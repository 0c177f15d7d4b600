"""`minfer run --grammar-file`: the generated text follows a GBNF grammar,
whatever the sampling, and ends when the grammar does (the grammars are
../shared/grammars', written outside this project)."""
import json
import re

import jsonschema

from conftest import MODEL, ROOT, SHARED, run_minfer

DATE = re.compile(r"(19|20)[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])")


def run_json(*args):
    return json.loads(run_minfer("run", MODEL, "--json", *args).stdout)


def test_sampled_texts_follow_the_grammar():
    for seed in range(8):
        out = run_json("-p", "The day was", "--grammar-file", SHARED / "grammars" / "date.gbnf",
                       "--temp", "1.5", "--top-k", "0", "--top-p", "1", "--min-p", "0", "--seed", seed, "-n", 30)
        assert out["text"].startswith("The day was")  # the prompt, then the generated text
        assert DATE.fullmatch(out["text"][len("The day was"):]), out
        assert out["finish_reason"] == "stop", out  # the date is whole: nothing can follow


def test_run_regex():
    out = run_json("-p", "The day was", "--regex", r"\d{4}-\d{2}", "--temp", "1", "--seed", 5, "-n", 20)
    assert re.fullmatch(r"\d{4}-\d{2}", out["text"][len("The day was"):]) and out["finish_reason"] == "stop", out


def test_without_a_grammar_the_text_is_free():
    out = run_json("-p", "The day was", "--temp", "0", "-n", 12)
    assert not DATE.fullmatch(out["text"][len("The day was"):])


def test_server_grammar_fields():
    from minfer_server import Server
    date = (SHARED / "grammars" / "date.gbnf").read_text()
    with Server() as s:
        for body in [{"grammar": date}, {"guided_grammar": date}, {"structured_outputs": {"grammar": date}}]:
            status, _, data = s.request("POST", "/v1/completions", {"prompt": "The day was", "max_tokens": 30, "n": 4,
                                                                  "temperature": 1.5, "seed": 3, **body})
            assert status == 200, data
            for choice in json.loads(data)["choices"]:
                assert DATE.fullmatch(choice["text"]) and choice["finish_reason"] == "stop", choice
        status, _, data = s.request("POST", "/v1/chat/completions", {
            "messages": [{"role": "user", "content": "A date?"}], "max_tokens": 30, "grammar": date})
        assert status == 200 and DATE.fullmatch(json.loads(data)["choices"][0]["message"]["content"]), data
        # Any JSON object; one of a list of strings.
        for seed in range(4):
            status, _, data = s.request("POST", "/v1/chat/completions", {
                "messages": [{"role": "user", "content": "JSON please"}], "max_tokens": 200, "temperature": 1.0,
                "seed": seed, "response_format": {"type": "json_object"}})
            choice = json.loads(data)["choices"][0]
            assert choice["message"]["content"].startswith("{"), choice  # (the engine test checks whole texts)
            if choice["finish_reason"] == "stop":
                assert isinstance(json.loads(choice["message"]["content"]), dict), choice
        for body in [{"guided_choice": ["cat", "dog", "a bird"]}, {"structured_outputs": {"choice": ["cat", "dog", "a bird"]}}]:
            status, _, data = s.request("POST", "/v1/completions", {"prompt": "Pet:", "max_tokens": 10, "n": 6,
                                                                  "temperature": 2.0, "seed": 1, **body})
            assert status == 200, data
            assert {c["text"] for c in json.loads(data)["choices"]} <= {"cat", "dog", "a bird"}
        for body in [{"guided_regex": r"[A-Z][a-z]{2,8}!"}, {"structured_outputs": {"regex": r"[A-Z][a-z]{2,8}!"}}]:
            status, _, data = s.request("POST", "/v1/completions", {"prompt": "Name:", "max_tokens": 20, "n": 4,
                                                                  "temperature": 1.5, "seed": 2, **body})
            assert status == 200, data
            for c in json.loads(data)["choices"]:
                assert re.fullmatch(r"[A-Z][a-z]{2,8}!", c["text"]) and c["finish_reason"] == "stop", c
        status, _, data = s.request("POST", "/v1/completions", {"prompt": "a", "guided_regex": "a(?=b)"})
        assert status == 400 and "'guided_regex': line 1, column 3: lookaround" in json.loads(data)["error"]["message"], data
        # A JSON Schema, in each of the forms the APIs have: every output that ends validates.
        schema = {"type": "object", "properties": {"animal": {"enum": ["cat", "dog"]}, "legs": {"type": "integer"},
                                                   "name": {"type": "string", "maxLength": 5}},
                  "required": ["animal", "legs"], "additionalProperties": False}
        ended = 0
        for body in [{"response_format": {"type": "json_schema", "json_schema": {"name": "pet", "schema": schema}}},
                     {"guided_json": schema}, {"json_schema": schema}, {"structured_outputs": {"json": json.dumps(schema)}}]:
            status, _, data = s.request("POST", "/v1/completions", {"prompt": "Pet:", "max_tokens": 60, "n": 4,
                                                                  "temperature": 1.0, "seed": 4, **body})
            assert status == 200, data
            for c in json.loads(data)["choices"]:
                assert c["text"].lstrip().startswith("{"), c
                if c["finish_reason"] == "stop":
                    jsonschema.validate(json.loads(c["text"]), schema)
                    ended += 1
        assert ended >= 4, ended
        status, _, data = s.request("POST", "/v1/completions", {"prompt": "a", "grammar": 'root ::= "x" y'})
        err = json.loads(data)["error"]
        assert status == 400 and err["message"] == "'grammar': line 1, column 14: undefined rule 'y'", data


def test_grammar_check_walks_texts_through_the_masks(tmp_path):
    # SmolLM2's byte-level BPE encodes a text alone as it would inside an output.
    smol = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    schema = tmp_path / "pet.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"animal": {"enum": ["cat", "dog"]}, "legs": {"type": "integer"}},
                                  "required": ["animal", "legs"], "additionalProperties": False}))
    texts = tmp_path / "texts.jsonl"
    texts.write_text("\n".join(json.dumps({"text": t}) for t in [
        '{"animal": "cat", "legs": 4}', '{"animal":"dog","legs":-1}', '{"legs": 4, "animal": "cat"}', '{"animal": "cow", "legs": 4}']))
    lines = [json.loads(l) for l in run_minfer("grammar", "check", smol, "--json-schema", schema, "--input", texts, "--json").stdout.splitlines()]
    assert [l["accepted"] for l in lines[:4]] == [True, True, False, False]
    summary = lines[4]["summary"]
    assert summary["masks"] > 10 and summary["mask_us_p50"] > 0 and summary["compile_ms"] > 0
    schema.write_text('{"type": "string", "format": "hostname"}')
    proc = run_minfer("grammar", "check", smol, "--json-schema", schema, "--input", texts, check=False)
    assert proc.returncode == 3 and "format 'hostname' is not supported yet" in proc.stderr


SUITE = SHARED / "json-schema-test-suite" / "tests" / "draft2020-12"
BASELINE = ROOT / "tests" / "integration" / "data" / "json_schema_suite_baseline.json"


def test_json_schema_test_suite_ratchet(capsys):
    """The JSON-Schema-Test-Suite through `minfer grammar bench` (SmolLM2's
    tokenizer, every instance walked through the token masks), llguidance's
    way: the baseline lists the schemas that compile and how many of their
    valid instances are accepted. No invalid instance may ever be accepted;
    a schema that stops compiling or a valid instance no longer accepted is a
    regression; an improvement is reported (MINFER_UPDATE_RATCHET=1 writes it
    into the baseline)."""
    import collections
    import os
    smol = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    lines = [json.loads(l) for l in run_minfer("grammar", "bench", smol, SUITE, "--json", timeout=600).stdout.splitlines()]
    summary = lines.pop()["summary"]
    assert summary["invalid_accepted"] == 0, [l for l in lines if l.get("invalid_accepted")]
    now = {f"{l['file']}#{l['case']}": l["valid_accepted"] for l in lines if l["compiled"]}
    baseline = json.loads(BASELINE.read_text())
    lost = sorted(k for k in baseline if k not in now)
    worse = sorted(k for k in baseline if k in now and now[k] < baseline[k])
    better = sorted(k for k in now if k not in baseline or now[k] > baseline[k])
    refused = collections.Counter()
    for l in lines:
        if not l["compiled"]:
            why = l["error"].split("': ", 1)[-1]  # past "at '#/pointer'"
            m = re.match(r"'([$\w]+)'", why)
            refused[m.group(1) if m else " ".join(why.split()[:4])] += 1
    with capsys.disabled():
        print(f"\nJSON-Schema-Test-Suite: {summary['compiled']} of {summary['schemas']} schemas compile; "
              f"{summary['valid_accepted']} of {summary['valid']} valid instances accepted, "
              f"{summary['invalid_accepted']} of {summary['invalid']} invalid; refused by keyword: "
              + ", ".join(f"{k} {n}" for k, n in refused.most_common()))
        if better:
            print(f"improved over the baseline: {better}")
    if better and os.environ.get("MINFER_UPDATE_RATCHET") == "1":
        BASELINE.write_text(json.dumps(dict(sorted(now.items())), indent=0) + "\n")
    assert not lost and not worse, f"no longer compiles: {lost}; fewer valid instances accepted: {worse}"


def outside_strings(text):
    """A JSON text's characters outside its strings."""
    out, in_string, escaped = [], False, False
    for ch in text:
        if in_string:
            escaped, in_string = (False, True) if escaped else (ch == "\\", ch != '"')
        elif ch == '"':
            in_string = True
        else:
            out.append(ch)
    return "".join(out)


PET = {"type": "object", "properties": {"animal": {"enum": ["cat", "dog"]}, "legs": {"type": "integer", "minimum": 0, "maximum": 8},
                                        "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3},
                                        "weight": {"type": "number", "exclusiveMinimum": 0, "maximum": 99.5}},
       "required": ["animal", "legs", "tags"], "additionalProperties": False, "maxProperties": 3}


def test_compact_json_has_no_whitespace_between_tokens(tmp_path):
    """vLLM's structured_outputs.disable_any_whitespace, and --json-compact: only ',' and ':' between tokens
    (strings keep their spaces); without it the same sampling does write whitespace."""
    from minfer_server import Server
    body = {"prompt": "Pet:", "max_tokens": 80, "n": 4, "temperature": 1.5, "seed": 1}
    with Server() as s:
        def texts(**fields):
            status, _, data = s.request("POST", "/v1/completions", {**body, **fields})
            assert status == 200, data
            return [(c["text"], c["finish_reason"]) for c in json.loads(data)["choices"]]
        flexible = texts(structured_outputs={"json": PET, "disable_any_whitespace": False})
        assert any(re.search(r"\s", outside_strings(t)) for t, _ in flexible), flexible
        for fields in [{"structured_outputs": {"json": PET, "disable_any_whitespace": True}},
                       {"guided_json": PET, "structured_outputs": {"disable_any_whitespace": True}},
                       {"response_format": {"type": "json_schema", "json_schema": {"name": "pet", "schema": PET}},
                        "structured_outputs": {"disable_any_whitespace": True}}]:
            out = texts(**fields)
            for text, finish in out:
                assert text.startswith("{") and not re.search(r"\s", outside_strings(text)), (fields, text)
                if finish == "stop":
                    jsonschema.validate(json.loads(text), PET)
        status, _, data = s.request("POST", "/v1/completions", {**body, "guided_json": PET,
                                                                "structured_outputs": {"disable_any_whitespace": "yes"}})
        assert status == 400 and "'structured_outputs.disable_any_whitespace' must be true or false" in data.decode(), data
    # The CLI: run, grammar check, generate.
    schema = tmp_path / "pet.json"
    schema.write_text(json.dumps(PET))
    for seed in range(3):
        text = run_json("-p", "Pet:", "--json-schema", schema, "--json-compact", "--temp", "1.5", "--seed", seed, "-n", 80)["text"]
        assert not re.search(r"\s", outside_strings(text[len("Pet:"):])), text
    proc = run_minfer("run", MODEL, "-p", "x", "--json-compact", check=False)
    assert proc.returncode == 2 and "--json-compact goes with --json-schema" in proc.stderr
    smol = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    texts_file = tmp_path / "texts.jsonl"
    texts_file.write_text("\n".join(json.dumps({"text": t}) for t in [
        '{"animal":"cat","legs":4,"tags":["a b"]}', '{"animal": "cat","legs":4,"tags":[]}', '{"animal":"dog","legs":4,"tags":[] }']))
    lines = [json.loads(l) for l in run_minfer("grammar", "check", smol, "--json-schema", schema, "--json-compact",
                                               "--input", texts_file, "--json").stdout.splitlines()]
    assert [l["accepted"] for l in lines[:3]] == [True, False, False]
    requests = tmp_path / "requests.jsonl"
    requests.write_text("\n".join(json.dumps({"id": i, "prompt": "Pet:", "max_tokens": 80, "temperature": 1.5, "seed": i,
                                              "guided_json": PET}) for i in range(3)))
    results = tmp_path / "results.jsonl"
    run_minfer("generate", MODEL, "--input", requests, "--output", results, "--json-compact")
    for line in results.read_text().splitlines():
        text = json.loads(line)["choices"][0]["text"]
        assert text.startswith("{") and not re.search(r"\s", outside_strings(text)), text
