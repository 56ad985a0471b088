#lang racket/base
(error 'main "boom")
