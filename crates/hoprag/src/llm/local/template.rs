//! Chat templates: how a conversation becomes the token sequence a model family was
//! tuned on. Written from the formats, not from the files' Jinja; control tokens are
//! named here and inserted by id (see the tokenizer), text is encoded as plain text.

use crate::error::{Error, Result};
use crate::llm::{Message, Role};

/// A piece of a rendered prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// A control token, by its text.
    Control(&'static str),
    Text(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChatTemplate {
    /// `<|im_start|>ROLE\nCONTENT<|im_end|>\n` per message, then `<|im_start|>assistant\n`
    /// (SmolLM2, Qwen).
    ChatMl,
    /// `<start_of_turn>user\nCONTENT<end_of_turn>\n`, the assistant's role called `model`;
    /// no system role: the system prompt opens the first user turn (Gemma 2 and 3).
    Gemma,
}

impl ChatTemplate {
    /// The template of a vocabulary, told by the control tokens it has.
    pub fn detect(has_control: impl Fn(&str) -> bool) -> Result<ChatTemplate> {
        if has_control("<|im_start|>") && has_control("<|im_end|>") {
            Ok(ChatTemplate::ChatMl)
        } else if has_control("<start_of_turn>") && has_control("<end_of_turn>") {
            Ok(ChatTemplate::Gemma)
        } else {
            Err(Error::Model(
                "no known chat template for this model: its vocabulary has neither ChatML's <|im_start|>/<|im_end|> \
                 nor Gemma's <start_of_turn>/<end_of_turn> control tokens"
                    .into(),
            ))
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ChatTemplate::ChatMl => "chatml",
            ChatTemplate::Gemma => "gemma",
        }
    }

    /// The control token that closes a turn: generation stops when the model emits it.
    pub fn end_of_turn(self) -> &'static str {
        match self {
            ChatTemplate::ChatMl => "<|im_end|>",
            ChatTemplate::Gemma => "<end_of_turn>",
        }
    }

    /// The control token that opens a turn.
    fn start_of_turn(self) -> &'static str {
        match self {
            ChatTemplate::ChatMl => "<|im_start|>",
            ChatTemplate::Gemma => "<start_of_turn>",
        }
    }

    /// How many of a rendered prompt's pieces come before the turn of its last message:
    /// the part that repeats across the calls of a stage (instructions and
    /// demonstrations), worth keeping the model's state for.
    pub fn shared_prefix(self, pieces: &[Piece]) -> usize {
        let open = Piece::Control(self.start_of_turn());
        let mut starts = pieces.iter().enumerate().filter(|(_, p)| **p == open).map(|(i, _)| i).rev();
        starts.next(); // the assistant turn left open for the answer
        starts.next().unwrap_or(0)
    }

    /// The prompt for `messages`, ending with an open assistant turn that already holds
    /// `prefill` (the start of the answer the model is to continue; may be empty).
    pub fn render(self, messages: &[Message], prefill: &str) -> Vec<Piece> {
        match self {
            ChatTemplate::ChatMl => chatml(messages, prefill),
            ChatTemplate::Gemma => gemma(messages, prefill),
        }
    }
}

fn chatml(messages: &[Message], prefill: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    for m in messages {
        let role = match m.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        out.push(Piece::Control("<|im_start|>"));
        out.push(Piece::Text(format!("{role}\n{}", m.content)));
        out.push(Piece::Control("<|im_end|>"));
        out.push(Piece::Text("\n".into()));
    }
    out.push(Piece::Control("<|im_start|>"));
    out.push(Piece::Text(format!("assistant\n{prefill}")));
    out
}

fn gemma(messages: &[Message], prefill: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    // System messages wait for the next user turn and open it, as the family has no
    // system role. One left at the end becomes a user turn of its own.
    let mut pending_system: Vec<&str> = Vec::new();
    let turn = |out: &mut Vec<Piece>, role: &str, content: String| {
        out.push(Piece::Control("<start_of_turn>"));
        out.push(Piece::Text(format!("{role}\n{content}")));
        out.push(Piece::Control("<end_of_turn>"));
        out.push(Piece::Text("\n".into()));
    };
    for m in messages {
        match m.role {
            Role::System => pending_system.push(&m.content),
            Role::User => {
                let mut content = String::new();
                for s in pending_system.drain(..) {
                    content.push_str(s);
                    content.push_str("\n\n");
                }
                content.push_str(&m.content);
                turn(&mut out, "user", content);
            }
            Role::Assistant => turn(&mut out, "model", m.content.clone()),
        }
    }
    if !pending_system.is_empty() {
        turn(&mut out, "user", pending_system.join("\n\n"));
    }
    out.push(Piece::Control("<start_of_turn>"));
    out.push(Piece::Text(format!("model\n{prefill}")));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(pieces: &[Piece]) -> String {
        pieces
            .iter()
            .map(|p| match p {
                Piece::Control(c) => c.to_string(),
                Piece::Text(t) => t.clone(),
            })
            .collect()
    }

    fn conversation() -> Vec<Message> {
        vec![
            Message::system("Be brief."),
            Message::user("Hi?"),
            Message::assistant("Hello."),
            Message::user("Name one."),
        ]
    }

    #[test]
    fn chatml_wraps_every_message() {
        let rendered = ChatTemplate::ChatMl.render(&conversation(), "");
        assert_eq!(
            text(&rendered),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi?<|im_end|>\n\
             <|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nName one.<|im_end|>\n<|im_start|>assistant\n"
        );
        assert_eq!(rendered.iter().filter(|p| matches!(p, Piece::Control(_))).count(), 9);
        let prefilled = ChatTemplate::ChatMl.render(&[Message::user("x")], "{");
        assert!(text(&prefilled).ends_with("<|im_start|>assistant\n{"));
    }

    #[test]
    fn gemma_folds_the_system_prompt_into_the_first_user_turn() {
        let rendered = ChatTemplate::Gemma.render(&conversation(), "");
        assert_eq!(
            text(&rendered),
            "<start_of_turn>user\nBe brief.\n\nHi?<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n\
             <start_of_turn>user\nName one.<end_of_turn>\n<start_of_turn>model\n"
        );
        let only_system = ChatTemplate::Gemma.render(&[Message::system("Rules.")], "{");
        assert_eq!(text(&only_system), "<start_of_turn>user\nRules.<end_of_turn>\n<start_of_turn>model\n{");
    }

    #[test]
    fn the_shared_prefix_ends_before_the_last_message() {
        let messages = conversation();
        let chatml = ChatTemplate::ChatMl.render(&messages, "");
        let n = ChatTemplate::ChatMl.shared_prefix(&chatml);
        assert!(text(&chatml[..n]).ends_with("Hello.<|im_end|>\n"));
        assert_eq!(text(&chatml[n..]), "<|im_start|>user\nName one.<|im_end|>\n<|im_start|>assistant\n");
        let gemma = ChatTemplate::Gemma.render(&messages, "");
        let n = ChatTemplate::Gemma.shared_prefix(&gemma);
        assert!(text(&gemma[n..]).starts_with("<start_of_turn>user\nName one."));
        // A single turn shares nothing.
        let single = ChatTemplate::Gemma.render(&messages[..2], "");
        assert_eq!(ChatTemplate::Gemma.shared_prefix(&single), 0, "the system prompt is inside the only user turn");
    }

    #[test]
    fn control_text_inside_messages_stays_text() {
        let rendered = ChatTemplate::ChatMl.render(&[Message::user("a <|im_end|> b")], "");
        assert_eq!(rendered[1], Piece::Text("user\na <|im_end|> b".into()));
    }

    #[test]
    fn detection_by_control_tokens() {
        let chatml = ["<|im_start|>", "<|im_end|>"];
        assert_eq!(ChatTemplate::detect(|t| chatml.contains(&t)).unwrap(), ChatTemplate::ChatMl);
        let gemma = ["<start_of_turn>", "<end_of_turn>", "<bos>"];
        assert_eq!(ChatTemplate::detect(|t| gemma.contains(&t)).unwrap(), ChatTemplate::Gemma);
        assert!(ChatTemplate::detect(|t| t == "<|im_start|>").is_err());
    }
}
