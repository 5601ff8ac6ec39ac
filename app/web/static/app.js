// misstriage front-end behaviour. No inline scripts anywhere (Content-Security-Policy).
"use strict";
