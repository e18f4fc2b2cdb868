// Package chats keeps Chats and shared files outside any Session: the Chat
// aggregate's commands and the begun turn handed to the Chat runner.
package chats
