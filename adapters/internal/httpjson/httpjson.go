package httpjson

import (
	"encoding/json"
	"net/http"
)

// Write answers v as JSON with status, never cached.
func Write(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// ErrorBody is the body of an error answer: {"error": {"code", "message"}}.
// An adapter whose errors say more embeds it.
type ErrorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// WriteError answers an ErrorBody of code and msg with status, never
// cached.
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	var b ErrorBody
	b.Error.Code, b.Error.Message = code, msg
	Write(w, status, b)
}
