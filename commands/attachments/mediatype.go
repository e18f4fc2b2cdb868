package attachments

import (
	"mime"
	"net/http"
	"path"
	"strings"
	"unicode/utf8"
)

// sourceTypes are the media types of source and text files that browsers
// upload as application/octet-stream (or with no type) and that Go's mime
// table does not know on every system. Each is what the file is: text.
var sourceTypes = map[string]string{
	".py":   "text/x-python",
	".go":   "text/x-go",
	".rs":   "text/x-rust",
	".rb":   "text/x-ruby",
	".java": "text/x-java",
	".c":    "text/x-c",
	".h":    "text/x-c",
	".cc":   "text/x-c++",
	".cpp":  "text/x-c++",
	".hpp":  "text/x-c++",
	".ts":   "text/x-typescript",
	".tsx":  "text/x-typescript",
	".js":   "text/javascript",
	".mjs":  "text/javascript",
	".sh":   "text/x-shellscript",
	".md":   "text/markdown",
	".toml": "text/x-toml",
	".yaml": "text/x-yaml",
	".yml":  "text/x-yaml",
	".json": "application/json",
	".txt":  "text/plain",
	".csv":  "text/csv",
	".sql":  "text/x-sql",
}

// sniffMediaType is the media type of an upload declared with none (or as
// application/octet-stream): from its name's extension when that names a
// known type, else from its first bytes (what http.DetectContentType sees,
// and text/plain for valid UTF-8 without NULs). A text type carries
// charset=utf-8 when the bytes are UTF-8.
func sniffMediaType(name string, head []byte) string {
	ext := strings.ToLower(path.Ext(name))
	mt := sourceTypes[ext]
	if mt == "" && ext != "" {
		if t := mime.TypeByExtension(ext); t != "" {
			mt, _, _ = mime.ParseMediaType(t)
		}
	}
	if mt == "" {
		mt, _, _ = mime.ParseMediaType(http.DetectContentType(head))
		if mt == "application/octet-stream" && len(head) > 0 && utf8.Valid(head) && !strings.ContainsRune(string(head), 0) {
			mt = "text/plain"
		}
	}
	if mt == "" {
		return "application/octet-stream"
	}
	if strings.HasPrefix(mt, "text/") && utf8.Valid(head) {
		return mime.FormatMediaType(mt, map[string]string{"charset": "utf-8"})
	}
	return mt
}
