// Written for this project: varied English prose, a little code, numbers and a
// few non-ASCII words, so a few hundred BPE merges find common English pieces.
#include "model/kimi_k3/training_text.h"

namespace deltafin {

std::string_view builtin_training_text() {
  return R"TEXT(The model reads the prompt, one token at a time, and writes the next token.
A mixture of experts sends every token to a few of its many experts. Each expert is a small
network; the router decides which experts see the token, and the outputs are added together.
The experts live on the drive, not in memory. When a token needs an expert that is not in the
cache, the runtime reads it from the drive, and the time it takes is the time the drive needs.
Reading faster means reading fewer bytes, reading them from more drives at once, and reading
them before they are needed. The cache keeps the experts that were used recently; the heat
histogram remembers which experts are used most often across many runs.
The capital of France is Paris. The largest planet in our solar system is Jupiter. Water boils
at one hundred degrees Celsius at sea level. There are seven days in a week and twelve months
in a year. The quick brown fox jumps over the lazy dog, and the dog does not seem to mind.
She said that she would come back tomorrow, but it's not certain that she'll be on time.
They're going to the market; we've already been there, and I'd rather stay at home today.
In the morning the city is quiet. People walk to work, shops open their doors, and the first
buses of the day move slowly through the streets. By noon the streets are full of people.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 11 12 100 256 1024 2048 4096 65536 3.14159 2.71828 1e-5 42.
Dates such as 2026-11-29 and times such as 10:52 appear in logs, next to sizes like 17.5 MB.
def forward(self, tokens):
    hidden = self.embed(tokens)
    for layer in self.layers:
        hidden = layer(hidden)
    return self.head(self.norm(hidden))

int main(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    printf("%s\n", argv[i]);
  }
  return 0;
}

{"role": "user", "content": "Hello, world!"}
{"role": "assistant", "content": "Hello! How can I help you today?"}
Questions and answers: What is the time? It is ten past ten. Where is the station? It is
near the river, behind the old library. Why is the sky blue? Because the air scatters blue
light more than red light. How many legs does a spider have? A spider has eight legs.
The function returns a list of values; the caller checks each value and reports an error
when a value is out of range. An error message should name the file, the field and the
problem, so that the person who reads it knows what to change.
Some words from other languages: café, naïve, Straße, garçon, señor, Zürich, Kraków, Ελλάδα,
Москва, 東京, 北京, 서울, مرحبا, नमस्ते, and a few symbols: € £ ¥ © ® ° ± × ÷ → ← ✓ 🙂.
Streaming the experts from the drive lets a small machine run a very large model. The model
decides every token; speed comes only from reading, caching and scheduling, never from
changing the model. The same prompt gives the same answer, bit for bit, every time it runs.
When the run ends, the runtime prints how many tokens it made, how long each one took, how
many bytes it read from each drive, and how often the cache already held what was needed.
)TEXT";
}

}  // namespace deltafin
