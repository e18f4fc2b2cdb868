// Package automations keeps Automation records and folders (save, move,
// delete) and checks their graphs; runs belong to package automationrunner.
package automations
