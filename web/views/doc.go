// Package views holds the dashboard's templ components and the view models
// they take.
//
// A view model is a plain struct of already formatted strings and numbers:
// the components only lay them out. Everything that decides what a value
// means or how a number is written for people (percentages, ages, thousands
// separators, chart geometry) happens in package web, which builds the
// models.
//
// This package must not know the domain, the ports or HTTP: it imports templ
// and the standard library only, so a view can be rendered and checked in a
// test from a literal struct.
//
// Elements that tests, browser tests and monitoring probes select carry a
// data-testid attribute; their names are part of the dashboard's interface
// (see web's package documentation for the list).
package views
