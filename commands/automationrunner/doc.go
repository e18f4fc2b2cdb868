// Package automationrunner is the process manager of Automation runs and
// triggers: it starts, walks, resumes and ends each run node by node,
// reacts to committed events for its triggers, and journals every step.
package automationrunner
