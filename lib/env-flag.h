/* env-flag.h -- the one reading of a boolean environment variable,
   for libkamepool and libckarena alike.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#ifndef ENV_FLAG_H
#define ENV_FLAG_H

#include <stdbool.h>
#include <string.h>
#include <strings.h>

/* V, the value of a boolean environment variable (getenv's result):
   unset (NULL) or empty gives DFLT; "0", "no", "false" and "off", in
   any case, are false; anything else is true.  */
static inline bool
env_flag_value (const char *v, bool dflt)
{
  if (v == NULL || *v == '\0')
    return dflt;
  return !(strcmp (v, "0") == 0 || strcasecmp (v, "no") == 0
           || strcasecmp (v, "false") == 0 || strcasecmp (v, "off") == 0);
}

#endif /* ENV_FLAG_H */
