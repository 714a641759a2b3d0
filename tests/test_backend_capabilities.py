"""What a protocol is, declared on its backend class and asked by the plan, the engine and the commands."""

from __future__ import annotations

from typing import Any

from evaltui.backends import BACKENDS, backend_class, make_backend, make_client
from evaltui.engine.run.simproc import sim_url_for
from evaltui.plan import ModelConfig


def cfg(type_: str, url: str = "http://127.0.0.1:9/v1", **kw: Any) -> ModelConfig:
    return ModelConfig.model_validate({"abbr": "m", "type": type_, "url": url, "model": "x", **kw})


def test_each_type_says_its_url_form_its_api_path_and_whether_it_needs_a_model_name() -> None:
    assert (BACKENDS["lightllm"].api_path, BACKENDS["lightllm"].needs_model) == ("/generate", False)
    assert "/generate URL" in BACKENDS["lightllm"].url_form
    for name in ("lightllm-chat", "openai-chat", "openai-completions"):
        assert (BACKENDS[name].api_path, BACKENDS[name].needs_model) == ("/v1", True) and "base URL" in BACKENDS[name].url_form
    assert sim_url_for("http://127.0.0.1:5", cfg("lightllm", "sim://")) == "http://127.0.0.1:5/m/generate"
    assert sim_url_for("http://127.0.0.1:5", cfg("openai-chat", "sim://")) == "http://127.0.0.1:5/m/v1"


def test_the_greedy_rule_is_the_protocols() -> None:
    """LightLLM samples only with do_sample; the OpenAI types with a temperature above 0, or do_sample without one."""
    lightllm, chat = backend_class(cfg("lightllm")), backend_class(cfg("openai-chat"))
    assert not lightllm.samples({"temperature": 0.7}) and lightllm.samples({"do_sample": True})
    assert chat.samples({"temperature": 0.7}) and not chat.samples({"temperature": 0, "do_sample": True}) and chat.samples({"do_sample": True})
    assert not chat.samples({})


def test_lightllm_chat_is_the_chat_protocol_with_lightllms_health_check() -> None:
    chat = make_backend(cfg("lightllm-chat", "http://127.0.0.1:9/v1"), make_client(cfg("lightllm-chat")), api_key=None)
    openai = make_backend(cfg("openai-chat", "http://127.0.0.1:9/v1"), make_client(cfg("openai-chat")), api_key=None)
    assert str(chat.router.replicas[0].health) == "http://127.0.0.1:9/health"
    assert str(openai.router.replicas[0].health) == "http://127.0.0.1:9/v1/models"
    assert chat.router.replicas[0].endpoint == openai.router.replicas[0].endpoint
    assert chat.url_hint() == "type lightllm-chat wants the base URL, e.g. http://host:8000/v1"
