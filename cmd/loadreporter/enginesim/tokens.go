package enginesim

import (
	"strings"
	"unicode/utf8"
)

// charsPerToken is the tokenizer stand-in: English text averages about
// four characters per token with Llama 3's tokenizer (and most BPE
// vocabularies). There is no tokenizer; this is the whole of it.
const charsPerToken = 4

// chatTemplateTokens approximate what Llama 3's chat template adds: a
// begin-of-text token, about four per message (header markers, role,
// end-of-turn) and four for the assistant header it ends with.
const (
	chatBeginTokens      = 1
	chatPerMessageTokens = 4
	chatAssistantTokens  = 4
)

// textTokens is the token count of text: one per four characters, at
// least one for a text that is not empty.
func textTokens(text string) int {
	n := utf8.RuneCountInString(text)
	return (n + charsPerToken - 1) / charsPerToken
}

// eosTokenID is Llama 3's <|eot_id|>, the stop token a request that sets
// no maximum is said to have matched.
const eosTokenID = 128009

// words are the output: token k is words[k % len(words)], with id
// wordIDs+k%len(words). Any text would do; a fixed one makes outputs
// predictable for tests.
var words = strings.Fields(`the quick brown fox jumps over a lazy dog while seven
bright engines hum along the quiet river and every router counts its
requests before it sends them`)

const wordIDs = 1000

// tokenText is the text of output token k (0-based): a word with its
// leading space.
func tokenText(k int) string { return " " + words[k%len(words)] }

// tokenID is the id of output token k.
func tokenID(k int) int { return wordIDs + k%len(words) }

// outputText is the text of the first n output tokens.
func outputText(n int) string {
	var b strings.Builder
	for k := range n {
		b.WriteString(tokenText(k))
	}
	return b.String()
}

// outputIDs are the ids of the first n output tokens.
func outputIDs(n int) []int {
	ids := make([]int, n)
	for k := range ids {
		ids[k] = tokenID(k)
	}
	return ids
}
