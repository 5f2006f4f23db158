//! Golden renderings: the embedded chat templates of the panel's models, rendered with
//! minijinja, must equal the renderings recorded in models.toml (which come from
//! transformers' `apply_chat_template`).

use runner_engine::candle::chat_template::{known, ChatTemplate};
use runner_engine::panel::Panel;
use runner_engine::{Message, Role};

fn panel() -> Panel {
    let path = crate::common::repo_root().join("models.toml");
    Panel::load(&path).expect("models.toml parses")
}

fn template_for(arch: &str) -> ChatTemplate {
    match arch {
        "qwen2" => ChatTemplate::new(known::QWEN2_5, None, Some("<|im_end|>".into())),
        "llama" => ChatTemplate::new(
            known::LLAMA3_1,
            Some("<|begin_of_text|>".into()),
            Some("<|eot_id|>".into()),
        ),
        "gemma3" => ChatTemplate::new(known::GEMMA3, Some("<bos>".into()), Some("<eos>".into())),
        other => panic!("no embedded template for {other}"),
    }
}

fn message(role: Role, content: &str) -> Message {
    Message {
        role,
        content: content.into(),
    }
}

const SYSTEM: &str = "You judge evidence.\nAnswer in JSON.";
const USER: &str = "Rain is likely: {\"p\": 0.7}. What now?";

#[test]
fn every_panel_template_renders_like_transformers() {
    let panel = panel();
    assert_eq!(panel.models.len(), 4);
    for (name, entry) in &panel.models {
        let t = template_for(&entry.arch);
        let got = t
            .render(&[message(Role::System, SYSTEM), message(Role::User, USER)])
            .unwrap();
        let want = entry
            .chat
            .rendered_system_user
            .replace("{system}", SYSTEM)
            .replace("{user}", USER);
        assert_eq!(got, want, "{name}: system + user");
        if let Some(user_only) = &entry.chat.rendered_user_only {
            let got = t.render(&[message(Role::User, USER)]).unwrap();
            assert_eq!(got, user_only.replace("{user}", USER), "{name}: user only");
        }
    }
}

#[test]
fn bos_appears_once_in_templates_that_carry_it() {
    for (arch, bos) in [("llama", "<|begin_of_text|>"), ("gemma3", "<bos>")] {
        let text = template_for(arch)
            .render(&[message(Role::User, USER)])
            .unwrap();
        assert!(text.starts_with(bos), "{arch}");
        assert_eq!(text.matches(bos).count(), 1, "{arch}");
    }
}
